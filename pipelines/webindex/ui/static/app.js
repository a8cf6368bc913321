// Web index UI: hash-routed views over the same-origin JSON API.
// All data is inserted as text nodes or attribute values, never as HTML.
'use strict';

const SEARCH_LIMIT = 50;
const TOP_N = 20;

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

function resultList(results) {
  if (!results || results.length === 0) return el('p', { class: 'muted' }, 'No pages.');
  return el('ol', { class: 'results' }, results.map(r => el('li', null,
    pageLink(r.url, r.title || r.url),
    el('div', { class: 'url' }, r.url, ' · ', r.inbound_count, ' inbound'))));
}

async function topView() {
  const data = await api('/api/top', { n: TOP_N });
  return [el('h1', null, 'Top pages'),
    el('p', { class: 'muted' }, 'Canonical pages by inbound link count.'),
    resultList(data.results)];
}

async function searchView(params) {
  const q = params.get('q') || '';
  input.value = q;
  if (q.trim() === '') return topView();
  const data = await api('/api/search', { q, limit: SEARCH_LIMIT });
  const n = (data.results || []).length;
  return [el('h1', null, 'Results for “', q, '”'),
    el('p', { class: 'muted' }, data.total, ' matching page', data.total === 1 ? '' : 's',
      n < data.total ? ' (showing ' + n + ')' : ''),
    resultList(data.results)];
}

async function pageView(params) {
  const url = params.get('url') || '';
  if (url === '') throw new Error('no page URL given');
  const p = await api('/api/page', { url });
  const canonical = p.canonical && p.canonical !== p.url;
  const dups = p.duplicates || [], inlinks = p.inlinks || [], outlinks = p.outlinks || [];
  const out = [
    el('h1', null, p.title || p.url),
    el('dl', null,
      el('dt', null, 'URL'), el('dd', null, p.url, ' ', externalLink(p.url)),
      el('dt', null, 'Canonical'), el('dd', null, canonical ? pageLink(p.canonical) : 'this page'),
      el('dt', null, 'Rank'), el('dd', null, p.rank),
      el('dt', null, 'Inbound links'), el('dd', null, p.inbound_count, canonical ? ' (of the canonical)' : '')),
    el('h2', null, 'Duplicates (', dups.length, ')'),
    dups.length ? el('ul', null, dups.map(d => el('li', null, pageLink(d))))
      : el('p', { class: 'muted' }, 'None.'),
    el('h2', null, 'Inlinks (', inlinks.length, ')', canonical ? ' — to the canonical' : ''),
  ];
  out.push(inlinks.length ? el('table', null,
    el('thead', null, el('tr', null, el('th', null, 'Source'), el('th', null, 'Target'), el('th', null, 'Anchor'))),
    el('tbody', null, inlinks.map(l => el('tr', null,
      el('td', null, pageLink(l.source)), el('td', null, l.target), el('td', null, l.anchor))))
  ) : el('p', { class: 'muted' }, 'None.'));
  out.push(el('h2', null, 'Outlinks (', outlinks.length, ')'));
  out.push(outlinks.length ? el('ul', null, outlinks.map(l => el('li', null,
    pageLink(l.target), l.anchor ? el('span', { class: 'muted' }, ' — ', l.anchor) : null)))
    : el('p', { class: 'muted' }, 'None.'));
  return out;
}

const routes = { '/': topView, '/search': searchView, '/page': pageView };
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
