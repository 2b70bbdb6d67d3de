// readpast dashboard: refreshes the live part (#live) of the overview and
// of a queue's page every few seconds without reloading the page, while
// the tab is visible, and scrolls a flow's drawing, when it is wider than
// its frame, to the job the page is about. The pages work without it.
(function () {
  'use strict';
  var wrap = document.querySelector('.flow-wrap');
  var current = wrap && wrap.querySelector('.node.current rect');
  if (current && wrap.scrollWidth > wrap.clientWidth) {
    var box = current.getBoundingClientRect();
    var frame = wrap.getBoundingClientRect();
    wrap.scrollLeft += box.left + box.width / 2 - (frame.left + frame.width / 2);
  }
})();

(function () {
  'use strict';
  var live = document.getElementById('live');
  if (!live || !window.fetch) {
    return;
  }
  var url = live.getAttribute('data-live');
  var every = Math.max(1000, Number(live.getAttribute('data-every')) || 5000);
  var timer = null;
  var busy = false;
  var refreshes = 0;

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, every);
  }

  // keyOf names an element so that it can be found again in the new HTML.
  function keyOf(el) {
    return el.getAttribute('data-focus') || el.id || '';
  }

  // The elements a keyboard user can focus, in order: one without a key
  // is found again by its place among them.
  var focusable = 'a[href], button, input, select, textarea, summary, [tabindex]';

  function swap(html) {
    var active = document.activeElement;
    var inLive = active && live.contains(active);
    var focusKey = inLive ? keyOf(active) : '';
    var focusAt = inLive ? Array.prototype.indexOf.call(live.querySelectorAll(focusable), active) : -1;
    var open = {};
    live.querySelectorAll('details[open]').forEach(function (d) {
      var owner = d.closest('[id]');
      if (owner) {
        open[owner.id] = true;
      }
    });
    live.innerHTML = html;
    live.querySelectorAll('details').forEach(function (d) {
      var owner = d.closest('[id]');
      if (owner && open[owner.id]) {
        d.open = true;
      }
    });
    var again = null;
    if (focusKey) {
      again = live.querySelector('[data-focus="' + CSS.escape(focusKey) + '"]') ||
        document.getElementById(focusKey);
    }
    if (!again && focusAt >= 0) {
      again = live.querySelectorAll(focusable)[focusAt] || null;
    }
    if (again) {
      again.focus();
    }
    refreshes++;
    live.setAttribute('data-refreshes', String(refreshes));
  }

  function refresh() {
    if (document.hidden) {
      return; // visibilitychange brings it back
    }
    if (busy) {
      return;
    }
    busy = true;
    fetch(url, { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'text/html' } })
      .then(function (res) {
        if (res.status === 401) {
          window.location.reload(); // the login ended: the page goes to the login
          throw new Error('login needed');
        }
        if (!res.ok) {
          throw new Error('HTTP ' + res.status);
        }
        return res.text();
      })
      .then(function (html) {
        swap(html);
        live.removeAttribute('data-stale');
      })
      .catch(function () {
        live.setAttribute('data-stale', 'true');
      })
      .finally(function () {
        busy = false;
        schedule();
      });
  }

  document.addEventListener('visibilitychange', function () {
    if (!document.hidden) {
      refresh();
    }
  });
  schedule();
})();
