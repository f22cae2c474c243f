// Loads plotly.js once the page is parsed, then draws every [data-plotly] element from the JSON
// figure named by the attribute, and again after htmx swaps a region in. A point whose customdata[0] is a path is a link (release -> its diff).
(function () {
  var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)");
  // The figures are built for the light scheme; in the dark one the chart takes the page's own
  // colours (app.css variables) instead of staying a white box.
  function themed(layout) {
    layout = narrow(layout);
    if (!dark || !dark.matches) return layout;
    var css = getComputedStyle(document.documentElement);
    var ink = css.getPropertyValue("--ink").trim(), line = css.getPropertyValue("--line").trim();
    var out = Object.assign({}, layout, {paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)"});
    out.font = Object.assign({}, layout.font || {}, {color: ink});
    Object.keys(out).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        out[key] = Object.assign({}, out[key], {gridcolor: line, linecolor: line, zerolinecolor: line});
      }
    });
    if (out.legend) out.legend = Object.assign({}, out.legend, {bgcolor: "rgba(0,0,0,0)"});
    return out;
  }
  // On a phone-width screen a legend above the plot wraps onto several lines and covers it: put
  // it under the x axis, and give it the room.
  function narrow(layout) {
    if (window.innerWidth > 760 || !layout.showlegend) return layout;
    var margin = Object.assign({}, layout.margin || {}, {b: 110, r: 10});
    return Object.assign({}, layout, {
      margin: margin,
      height: (layout.height || 300) + 60,
      legend: Object.assign({}, layout.legend || {}, {orientation: "h", x: 0, y: -0.25, yanchor: "top"}),
    });
  }
  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-plotly]").forEach(function (el) {
      var source = document.getElementById(el.dataset.plotly);
      if (!source || el.dataset.drawn === source.textContent.length + "") return;
      var fig = JSON.parse(source.textContent);
      el.dataset.drawn = source.textContent.length + "";
      // data-rendered once plotly has finished (ticks render asynchronously). Not a class: htmx's
      // settle step restores classes on swapped elements and would wipe it.
      Plotly.react(el, fig.data, themed(fig.layout), {displaylogo: false, responsive: true,
        modeBarButtonsToRemove: ["select2d", "lasso2d", "toImage"]}).then(function () {
        el.dataset.rendered = "1";
      });
      if (!el.dataset.clickBound) {
        el.on("plotly_click", function (ev) {
          // Several traces share an x (a release is also a point of the line): prefer the link.
          var links = (ev.points || []).map(function (p) { return p.customdata && p.customdata[0]; })
            .filter(function (u) { return typeof u === "string" && u.charAt(0) === "/"; });
          if (links.length) window.location.href = links[0];
        });
        el.dataset.clickBound = "1";
      }
    });
  }
  // The bundle's address, from this script's own tag (known only while it runs).
  var bundle = document.currentScript && document.currentScript.dataset.bundle;
  document.addEventListener("DOMContentLoaded", function () {
    // plotly.js is added here, after the page is parsed: the text and tables never wait for it.
    if (window.Plotly || !bundle) { draw(document); return; }
    var script = document.createElement("script");
    script.src = bundle;
    script.addEventListener("load", function () { draw(document); });
    document.head.appendChild(script);
  });
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
  // The system switching scheme while the page is open: redraw every chart in the new colours.
  if (dark && dark.addEventListener) {
    dark.addEventListener("change", function () {
      document.querySelectorAll("[data-plotly]").forEach(function (el) { delete el.dataset.drawn; });
      draw(document);
    });
  }
})();
