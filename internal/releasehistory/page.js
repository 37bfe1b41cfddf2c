// Writes each time the page shows in the reader's own zone, which only the
// browser knows; the server's UTC time stays as the element's title.
(function () {
  "use strict";
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  function two(n) { return (n < 10 ? "0" : "") + n; }
  document.querySelectorAll("time[datetime]").forEach(function (el) {
    var d = new Date(el.getAttribute("datetime"));
    if (isNaN(d.getTime())) { return; }
    el.textContent = d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " +
      two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds()) + " " + zone;
  });
})();
