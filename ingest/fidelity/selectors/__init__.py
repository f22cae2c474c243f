"""Read side of fidelity, one module per page family, all aggregating the FidelityDaily rollups
except ``calls`` (the call list and drill-down, through indexed lookups on the call table):

- ``common``: periods, verdict labels and badges, the ``Tally`` of rollup rows, tools that accept
  both a paste and a reference;
- ``agents``: the agents list, one agent family, its chart series, the overview panel, the API;
- ``calls``: the agent page's call list and the single-call drill-down;
- ``documents``: the reference documents page and the price table;
- ``totals``: plain-dict figures (per-agent totals, breakdowns, adoption, unused tools, cost per day).
"""
