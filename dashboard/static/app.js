// readpast dashboard: refreshes the overview's live part (#live) every few
// seconds without reloading the page, while the tab is visible. The page
// works without it; it only saves the reloads.
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

  function swap(html) {
    var active = document.activeElement;
    var focusKey = active && live.contains(active) ? keyOf(active) : '';
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
    if (focusKey) {
      var again = live.querySelector('[data-focus="' + CSS.escape(focusKey) + '"]') ||
        document.getElementById(focusKey);
      if (again) {
        again.focus();
      }
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
