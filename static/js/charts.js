// Loads plotly.js once the page is parsed, then draws every [data-plotly] element from the JSON
// figure named by the attribute, and again after htmx swaps a region in. A point whose customdata[0] is a path is a link (release -> its diff).
(function () {
  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-plotly]").forEach(function (el) {
      var source = document.getElementById(el.dataset.plotly);
      if (!source || el.dataset.drawn === source.textContent.length + "") return;
      var fig = JSON.parse(source.textContent);
      el.dataset.drawn = source.textContent.length + "";
      // data-rendered once plotly has finished (ticks render asynchronously). Not a class: htmx's
      // settle step restores classes on swapped elements and would wipe it.
      Plotly.react(el, fig.data, fig.layout, {displaylogo: false, responsive: true,
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
  document.addEventListener("DOMContentLoaded", function () {
    // plotly.js is added here, after the page is parsed: the text and tables never wait for it.
    var bundle = document.getElementById("plotly-bundle");
    if (window.Plotly || !bundle) { draw(document); return; }
    var script = document.createElement("script");
    script.src = bundle.href;
    script.addEventListener("load", function () { draw(document); });
    document.head.appendChild(script);
  });
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
})();
