
(function () {
  'use strict';
  window.addEventListener('error', function (e) { document.body.dataset.error = String(e.message || e); });
  var D = JSON.parse(document.getElementById('scan-data').textContent);
  var COLORS = { clean: '#43a047', nan: '#d81b60', inf: '#fb8c00', error: '#8e24aa', mismatch: '#1e88e5', invalid: '#6d4c41', crash: '#263238' };
  var NS = 'http://www.w3.org/2000/svg';

  function el(tag, attrs, parent, text) {
    var e = tag.indexOf('svg:') === 0 ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (parent) parent.appendChild(e);
    return e;
  }
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }
  function fmt(v) {
    if (v === null || v === undefined) return '-';
    if (typeof v !== 'number') return String(v);
    if (v !== 0 && (Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3)) return v.toExponential(2);
    return String(Math.round(v * 1e4) / 1e4);
  }
  function kv(parent, key, value) { var p = el('div', { class: 'kv' }, parent); el('b', {}, p, key + ': '); p.appendChild(document.createTextNode(value)); }
  function copyButton(parent, text) {
    var b = el('button', { class: 'copy', type: 'button' }, parent, 'copy');
    b.addEventListener('click', function () {
      if (navigator.clipboard) navigator.clipboard.writeText(text).then(function () { b.textContent = 'copied'; }, function () { b.textContent = 'select and copy'; });
    });
  }

  function summary() {
    var s = document.getElementById('summary');
    var badges = el('div', {}, s);
    Object.keys(D.counts).forEach(function (k) {
      if (D.counts[k]) el('span', { class: 'badge', style: 'background:' + COLORS[k] }, badges, D.counts[k] + ' ' + k);
    });
    kv(s, 'model', D.model.path || '');
    kv(s, 'inputs', (D.source.spec || '') + ' (' + (D.source.kind || '') + ')');
    kv(s, 'done', D.done + ' inputs, ' + D.failed + ' failing' + (D.finished ? '' : ' (the scan did not finish: resume it with --resume)'));
    var o = D.options || {};
    kv(s, 'watching', (o.break_on || []).join(', ') + ((o.inf_exclude || []).length ? ' (Inf allowed at ' + o.inf_exclude.join(', ') + ')' : '') +
      ((o.nan_exclude || []).length ? ' (NaN allowed at ' + o.nan_exclude.join(', ') + ')' : ''));
    if (o.reference) kv(s, 'reference', o.reference + ' — ' + ((o.tolerance || {}).rule || ''));
    var b = D.backend || {};
    kv(s, 'ran on', (b.backend || '') + (b.address ? ' ' + b.address : '') + ', ' + b.workers + ' workers x ' + b.threads_per_run + ' threads');
    if (D.seconds !== null && D.seconds !== undefined) kv(s, 'time', fmt(D.seconds) + ' s' + (D.done ? ' (' + fmt(D.done / Math.max(D.seconds, 1e-9)) + ' inputs/s)' : ''));
  }

  function bars() {
    var svg = document.getElementById('bars');
    var nodes = D.first_bad_nodes.slice(0, 40);
    var W = 960, left = 330, right = 50, rowH = 24, top = 10;
    var H = Math.max(50, top * 2 + nodes.length * rowH + 20);
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('width', W); svg.setAttribute('height', H);
    if (!nodes.length) { el('svg:text', { x: 20, y: 30 }, svg, 'No input went wrong at a node.'); svg.dataset.bars = '0'; return; }
    var max = Math.max.apply(null, nodes.map(function (n) { return n.count; }));
    var scale = (W - left - right) / max;
    var drawn = 0;
    nodes.forEach(function (n, i) {
      var y = top + i * rowH;
      var label = n.node + ' (' + n.op_type + ')';
      el('svg:text', { x: left - 8, y: y + rowH / 2 + 4, 'text-anchor': 'end' }, svg, label.length > 48 ? label.slice(0, 47) + '…' : label);
      var x = left;
      Object.keys(n.statuses).forEach(function (st) {
        var w = n.statuses[st] * scale;
        var r = el('svg:rect', { class: 'bar', x: x, y: y + 3, width: Math.max(w, 1), height: rowH - 6, fill: COLORS[st] || '#999' }, svg);
        el('svg:title', {}, r, label + ': ' + n.statuses[st] + ' ' + st + ' (' + n.inputs.slice(0, 8).join(', ') + (n.inputs.length > 8 ? ', …' : '') + ')');
        x += w; drawn++;
      });
      el('svg:text', { x: x + 6, y: y + rowH / 2 + 4 }, svg, n.count);
    });
    svg.dataset.bars = String(drawn);
  }

  function ticks(lo, hi, n) {
    if (hi === lo) return [lo];
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    [1, 2, 5, 10].some(function (m) { if ((hi - lo) / (step * m) <= n) { step *= m; return true; } return false; });
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return out;
  }

  function points(key) {
    var svg = document.getElementById('points');
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var S = D.series, vals = S.values[key] || [], n = S.index.length;
    var W = 960, H = 340, left = 70, right = 20, top = 28, bottom = 36;
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('width', W); svg.setAttribute('height', H);
    var finite = vals.map(num).filter(function (v) { return v !== null; });
    var x0 = n ? Math.min.apply(null, S.index) : 0, x1 = n ? Math.max.apply(null, S.index) : 1;
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    var y0 = finite.length ? Math.min.apply(null, finite) : 0, y1 = finite.length ? Math.max.apply(null, finite) : 1;
    if (y1 === y0) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
    function X(v) { return left + (v - x0) / (x1 - x0) * (W - left - right); }
    function Y(v) { return H - bottom - (v - y0) / (y1 - y0) * (H - top - bottom); }
    var yt = ticks(y0, y1, 5);
    var digits = yt.length > 1 ? Math.max(0, Math.min(12, -Math.floor(Math.log10(Math.abs(yt[1] - yt[0]))) + 1)) : 4;
    yt.forEach(function (t) {
      el('svg:line', { class: 'grid', x1: left, x2: W - right, y1: Y(t), y2: Y(t) }, svg);
      var label = Math.abs(t) >= 1e5 || (t !== 0 && Math.abs(t) < 1e-4) ? t.toExponential(Math.min(digits, 6)) : t.toFixed(digits);
      el('svg:text', { x: left - 6, y: Y(t) + 4, 'text-anchor': 'end' }, svg, label);
    });
    ticks(x0, x1, 8).filter(function (t) { return Math.round(t) === t; }).forEach(function (t) {
      el('svg:text', { x: X(t), y: H - bottom + 16, 'text-anchor': 'middle' }, svg, t);
    });
    el('svg:line', { class: 'axis', x1: left, x2: W - right, y1: H - bottom, y2: H - bottom }, svg);
    el('svg:line', { class: 'axis', x1: left, x2: left, y1: top, y2: H - bottom }, svg);
    el('svg:text', { x: W / 2, y: H - 4, 'text-anchor': 'middle' }, svg, 'input (position in the data set)');
    var dots = 0, marks = 0;
    for (var i = 0; i < n; i++) {
      var v = num(vals[i]), st = S.status[i], c;
      if (v !== null) {
        c = el('svg:circle', { class: 'point', cx: X(S.index[i]), cy: Y(v), r: st === 'clean' ? 2.5 : 4, fill: COLORS[st] || '#999' }, svg);
        dots++;
      } else if (st !== 'clean') {
        var x = X(S.index[i]);
        c = el('svg:path', { class: 'fail-mark', d: 'M' + (x - 4) + ' ' + (top - 14) + 'h8l-4 8z', fill: COLORS[st] || '#999' }, svg);
        marks++;
      } else continue;
      el('svg:title', {}, c, S.id[i] + ' (' + st + '): ' + fmt(num(vals[i])));
    }
    svg.dataset.points = String(dots);
    svg.dataset.marks = String(marks);
    svg.dataset.series = key;
  }

  function seriesPicker() {
    var sel = document.getElementById('series');
    var keys = Object.keys(D.series.values);
    keys.forEach(function (k) { el('option', { value: k }, sel, k); });
    // The statistic that varies most across inputs (a softmax's mean, say, is the same for all).
    function spread(k) {
      var v = D.series.values[k].map(num).filter(function (x) { return x !== null; });
      if (v.length < 2) return -1;
      var lo = Math.min.apply(null, v), hi = Math.max.apply(null, v), mid = Math.max(Math.abs(lo), Math.abs(hi));
      return mid ? (hi - lo) / mid : 0;
    }
    var stats = keys.filter(function (k) { return / (mean|min|max|std)$/.test(k); });
    var first = stats.length ? stats.reduce(function (a, b) { return spread(b) > spread(a) ? b : a; }) : keys[0];
    sel.value = first;
    sel.addEventListener('change', function () { points(sel.value); });
    points(first);
    var legend = document.getElementById('legend');
    Object.keys(COLORS).forEach(function (k) { if (D.counts[k]) { var s = el('span', {}, legend); el('i', { style: 'background:' + COLORS[k] }, s); s.appendChild(document.createTextNode(k)); } });
  }

  function failures() {
    var t = document.getElementById('failures'), note = document.getElementById('failures-note');
    var F = D.failures;
    note.textContent = F.length ? F.length + ' failing inputs' + (D.failures_left_out ? ' (and ' + D.failures_left_out + ' more in scan.json)' : '') +
      '. Each replays from failing/<id>.npz: run the command, or add the launch configuration to .vscode/launch.json and press F5.' : 'Every input ran clean.';
    if (!F.length) return;
    var head = el('tr', {}, el('thead', {}, t));
    ['input', 'status', 'first bad node', 'tensor', 'what', 'time', 'debug it'].forEach(function (h) { el('th', {}, head, h); });
    var body = el('tbody', {}, t);
    F.forEach(function (r) {
      var tr = el('tr', { 'data-id': r.id }, body);
      el('td', {}, tr, r.id);
      el('td', {}, tr).appendChild(el('span', { class: 'badge', style: 'background:' + (COLORS[r.status] || '#999') }, null, r.status));
      el('td', {}, tr, r.node ? r.node.where + ' (' + r.node.op_type + ')' : '-');
      var d = r.details || {};
      el('td', {}, tr, r.tensor ? r.tensor + (d.count !== undefined ? ' (' + d.count + (d.first_index ? ' from ' + JSON.stringify(d.first_index) : '') + ')' : '') : '-');
      el('td', { class: 'msg' }, tr, r.message);
      el('td', {}, tr, fmt(r.seconds) + ' s');
      var dbg = el('td', {}, tr), rp = r.replay || {};
      if (rp.command) {
        var c = el('div', {}, dbg); el('pre', { class: 'command' }, c, rp.command); copyButton(c, rp.command);
        var det = el('details', {}, dbg); el('summary', {}, det, 'VS Code launch configuration');
        var js = JSON.stringify(rp.launch, null, 2); el('pre', { class: 'launch' }, det, js); copyButton(det, js);
      } else {
        dbg.textContent = rp.note || '-';
      }
    });
  }

  function lists() {
    var s = document.getElementById('lists');
    function list(title, rows, text) {
      if (!rows || !rows.length) return;
      el('h2', {}, s, title);
      var ul = el('ul', {}, s);
      rows.forEach(function (r) { el('li', {}, ul, text(r)); });
    }
    list('Slowest inputs', D.slowest, function (r) { return r.id + ': ' + fmt(r.seconds) + ' s (' + r.status + ')'; });
    list('Furthest from the reference', D.worst, function (r) { return r.id + ': ' + r.metric + ' = ' + fmt(r.value) + ' at ' + r.output + ' (' + r.status + ')'; });
    list('Workers lost', D.incidents, function (r) { return r.message; });
  }

  summary();
  bars();
  seriesPicker();
  failures();
  lists();
  document.body.dataset.drawn = '1';
})();
