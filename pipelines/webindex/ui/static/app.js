// Web index UI: hash-routed views over the same-origin JSON API.
// All data is inserted as text nodes or attribute values, never as HTML.
'use strict';

const PAGE = 20;

const view = document.getElementById('view');
const errorBox = document.getElementById('error');
const form = document.getElementById('search-form');
const input = document.getElementById('q');

// el builds an element; attrs are set as attributes (or properties for
// functions), children are nodes or strings (which become text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (typeof v === 'function') e[k] = v;
    else if (v != null) e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c == null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function pageHref(url) { return '#/page?url=' + encodeURIComponent(url); }
function pageLink(url, text) { return el('a', { href: pageHref(url) }, text || url || '(empty)'); }

// external links only to http(s) URLs, so data cannot become a javascript: link.
function externalLink(url) {
  if (!/^https?:\/\//i.test(url)) return null;
  return el('a', { href: url, rel: 'noopener noreferrer', target: '_blank', title: 'Open the page itself' }, '↗');
}

async function api(path, params) {
  const res = await fetch(path + '?' + new URLSearchParams(params), { headers: { Accept: 'application/json' } });
  let body = null;
  try { body = await res.json(); } catch (_) { /* not JSON */ }
  if (!res.ok) {
    throw new Error((body && body.error) || ('HTTP ' + res.status + ' ' + res.statusText));
  }
  if (body == null) throw new Error('invalid JSON from ' + path);
  return body;
}

function showError(err) {
  errorBox.textContent = 'Error: ' + (err && err.message ? err.message : String(err));
  errorBox.hidden = false;
}

function route(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const qs = q.toString();
  return '#' + path + (qs ? '?' + qs : '');
}

// snippetNode marks the highlights of a snippet, whose ranges are byte
// offsets into its UTF-8 encoding; every piece becomes a text node.
function snippetNode(s) {
  if (!s) return null;
  const bytes = new TextEncoder().encode(s.text), dec = new TextDecoder();
  const p = el('p', { class: 'snippet' });
  let at = 0;
  for (const [start, end] of s.highlights || []) {
    if (start < at || end > bytes.length || start > end) break;
    p.append(dec.decode(bytes.slice(at, start)), el('mark', null, dec.decode(bytes.slice(start, end))));
    at = end;
  }
  p.append(dec.decode(bytes.slice(at)));
  return p;
}

function resultList(results) {
  if (!results || results.length === 0) return el('p', { class: 'muted' }, 'No pages.');
  return el('ol', { class: 'results' }, results.map(r => el('li', null,
    pageLink(r.url, r.title || r.url),
    el('div', { class: 'url' }, r.url, ' · ', r.inbound_count, ' inbound'),
    snippetNode(r.snippet))));
}

// pager links the pages of a list of total entries; at is a function
// from an offset to the route showing the list from there.
function pager(total, offset, n, at) {
  return el('nav', { class: 'pager', 'aria-label': 'Pages' },
    el('span', { class: 'muted' }, total ? (offset + 1) + '–' + (offset + n) + ' of ' + total : 'none'),
    offset > 0 ? el('a', { rel: 'prev', href: at(Math.max(0, offset - PAGE)) }, '← Previous') : null,
    offset + n < total ? el('a', { rel: 'next', href: at(offset + PAGE) }, 'Next →') : null);
}

function offsetOf(params) { return Math.max(0, parseInt(params.get('offset') || '0', 10) || 0); }

async function topView(params) {
  const offset = offsetOf(params);
  const [o, data] = await Promise.all([api('/api/overview', {}), api('/api/top', { offset, limit: PAGE })]);
  return [el('h1', null, 'Web index'),
    el('dl', { class: 'overview' },
      el('dt', null, 'Pages'), el('dd', null, o.pages),
      el('dt', null, 'Clusters'), el('dd', null, o.clusters, ' (', o.text_clusters, ' with text)'),
      el('dt', null, 'Links'), el('dd', null, o.links),
      el('dt', null, 'Last change'), el('dd', null, o.last_change && !o.last_change.startsWith('0001') ? o.last_change : 'never')),
    el('h2', null, 'Top pages'),
    el('p', { class: 'muted' }, 'Canonical pages by inbound link count.'),
    resultList(data.results),
    pager(data.total, offset, data.results.length, o2 => route('/', { offset: o2 }))];
}

async function searchView(params) {
  const q = params.get('q') || '';
  input.value = q;
  if (q.trim() === '') return topView(params);
  const offset = offsetOf(params);
  const data = await api('/api/search', { q, offset, limit: PAGE, snippets: 1 });
  return [el('h1', null, 'Results for “', q, '”'),
    el('p', { class: 'muted' }, data.total, ' matching page', data.total === 1 ? '' : 's'),
    resultList(data.results),
    pager(data.total, offset, data.results.length, o => route('/search', { q, offset: o }))];
}

async function siteView(params) {
  const host = params.get('host') || '';
  const offset = offsetOf(params);
  const data = await api('/api/site', { host, offset, limit: PAGE });
  return [el('h1', null, 'Pages of ', host),
    resultList(data.results),
    pager(data.total, offset, data.results.length, o => route('/site', { host, offset: o }))];
}

function anchorsText(l) { return (l.anchors || []).join(' · '); }

function inlinkTable(inlinks) {
  return inlinks.length ? el('table', null,
    el('thead', null, el('tr', null, el('th', null, 'Source'), el('th', null, 'Target'), el('th', null, 'Anchors'))),
    el('tbody', null, inlinks.map(l => el('tr', null,
      el('td', null, pageLink(l.source)), el('td', null, l.target), el('td', null, anchorsText(l))))))
    : el('p', { class: 'muted' }, 'None.');
}

function outlinkList(outlinks) {
  return outlinks.length ? el('ul', null, outlinks.map(l => el('li', null,
    pageLink(l.target), anchorsText(l) ? el('span', { class: 'muted' }, ' — ', anchorsText(l)) : null)))
    : el('p', { class: 'muted' }, 'None.');
}

async function linksView(params, kind) {
  const url = params.get('url') || '';
  if (url === '') throw new Error('no page URL given');
  const offset = offsetOf(params);
  const data = await api(kind === 'inlinks' ? '/api/inlinks' : '/api/outlinks', { url, offset, limit: PAGE });
  return [el('h1', null, kind === 'inlinks' ? 'Inlinks of ' : 'Outlinks of ', pageLink(url)),
    kind === 'inlinks' ? inlinkTable(data.links) : outlinkList(data.links),
    pager(data.total, offset, data.links.length, o => route('/' + kind, { url, offset: o }))];
}

async function pageView(params) {
  const url = params.get('url') || '';
  if (url === '') throw new Error('no page URL given');
  const p = await api('/api/page', { url, links: 10 });
  const canonical = p.canonical && p.canonical !== p.url;
  const dups = p.duplicates || [], inlinks = p.inlinks || [], outlinks = p.outlinks || [];
  const host = (() => { try { return new URL(p.url).host; } catch (_) { return ''; } })();
  return [
    el('h1', null, p.title || p.url),
    el('dl', null,
      el('dt', null, 'URL'), el('dd', null, p.url, ' ', externalLink(p.url)),
      el('dt', null, 'Site'), el('dd', null, el('a', { href: route('/site', { host }) }, host)),
      el('dt', null, 'Canonical'), el('dd', null, canonical ? pageLink(p.canonical) : 'this page'),
      el('dt', null, 'Rank'), el('dd', null, p.rank),
      el('dt', null, 'Inbound links'), el('dd', null, p.inbound_count, canonical ? ' (of the canonical)' : '')),
    el('h2', null, 'Duplicates (', dups.length, ')'),
    dups.length ? el('ul', null, dups.map(d => el('li', null, pageLink(d))))
      : el('p', { class: 'muted' }, 'None.'),
    el('h2', null, 'Inlinks (', p.inlinks_total, ')', canonical ? ' — to the canonical' : ''),
    inlinkTable(inlinks),
    p.inlinks_total > inlinks.length ? el('p', null, el('a', { href: route('/inlinks', { url: p.url }) }, 'All ', p.inlinks_total, ' inlinks →')) : null,
    el('h2', null, 'Outlinks (', p.outlinks_total, ')'),
    outlinkList(outlinks),
    p.outlinks_total > outlinks.length ? el('p', null, el('a', { href: route('/outlinks', { url: p.url }) }, 'All ', p.outlinks_total, ' outlinks →')) : null,
  ];
}

const routes = {
  '/': topView, '/search': searchView, '/page': pageView, '/site': siteView,
  '/inlinks': p => linksView(p, 'inlinks'), '/outlinks': p => linksView(p, 'outlinks'),
};
let generation = 0;

async function render() {
  const gen = ++generation;
  const hash = location.hash.replace(/^#/, '') || '/';
  const qi = hash.indexOf('?');
  const route = qi < 0 ? hash : hash.slice(0, qi);
  const params = new URLSearchParams(qi < 0 ? '' : hash.slice(qi + 1));
  errorBox.hidden = true;
  document.title = 'Web index';
  if (route !== '/search') input.value = '';
  view.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
  try {
    const fn = routes[route];
    if (!fn) throw new Error('unknown view ' + route);
    const nodes = await fn(params);
    if (gen !== generation) return;
    view.replaceChildren(...nodes);
    document.title = nodes[0].textContent + ' · Web index';
  } catch (err) {
    if (gen !== generation) return;
    view.replaceChildren();
    showError(err);
  }
}

form.addEventListener('submit', ev => {
  ev.preventDefault();
  const q = input.value.trim();
  location.hash = q ? '#/search?q=' + encodeURIComponent(q) : '#/';
});
window.addEventListener('hashchange', render);
render();
