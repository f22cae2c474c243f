// Behaviour every page shares, kept out of the templates so the Content-Security-Policy can forbid
// inline script: confirmations before destructive forms, the team switcher, the navigation
// toggle on small screens, the share bars.
(function () {
  // <form data-confirm="Delete this?">: ask first; a "Cancel" stops the submit.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
    }
  }, true);

  // <select data-navigate>: each option's value is the page to open.
  document.addEventListener("change", function (ev) {
    var select = ev.target;
    if (select instanceof HTMLSelectElement && select.hasAttribute("data-navigate") && select.value) {
      window.location.href = select.value;
    }
  });

  // <form data-transport-form>: show only the fields of the chosen transport (URL and headers for
  // HTTP/SSE; command, environment and working directory for stdio). Without JS all are shown.
  function transportFields(form) {
    var select = form.querySelector("select[name=transport]");
    if (!select) return;
    form.querySelectorAll("[data-transports]").forEach(function (el) {
      el.hidden = el.dataset.transports.split(" ").indexOf(select.value) === -1;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form[data-transport-form]").forEach(transportFields);
  });
  document.addEventListener("change", function (ev) {
    var form = ev.target instanceof Element ? ev.target.closest("form[data-transport-form]") : null;
    if (form && ev.target.name === "transport") transportFields(form);
  });

  // <button data-navtoggle>: on a small screen, opens and folds the navigation.
  document.addEventListener("click", function (ev) {
    var button = ev.target instanceof Element ? ev.target.closest("[data-navtoggle]") : null;
    if (!button) return;
    var open = button.closest(".topbar").classList.toggle("open");
    button.setAttribute("aria-expanded", open ? "true" : "false");
  });

  // <span class="bar" data-w="12.5">: the bar's length, set through the CSSOM (a style attribute
  // in the markup would be refused by the policy).
  function bars(root) {
    root.querySelectorAll(".bar[data-w]").forEach(function (el) {
      el.style.setProperty("--w", el.dataset.w);
    });
  }
  // A table wider than its card scrolls inside it (small screens): make it reachable by keyboard.
  function scrollables(root) {
    root.querySelectorAll("table, .card.flush, .scroll").forEach(function (el) {
      var scrolls = el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX === "auto";
      if (scrolls && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        el.dataset.scrollFocus = "1";
      } else if (!scrolls && el.dataset.scrollFocus) {
        el.removeAttribute("tabindex");
        delete el.dataset.scrollFocus;
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    bars(document);
    // Measuring every table forces a layout: done in the frame that paints the page anyway, not in
    // the DOMContentLoaded handler, where it held the event up by 10-30 ms on the long pages.
    window.requestAnimationFrame(function () { scrollables(document); });
  });
  document.addEventListener("htmx:afterSettle", function (ev) { bars(ev.target || document); scrollables(document); });
  window.addEventListener("resize", function () { scrollables(document); });
})();
