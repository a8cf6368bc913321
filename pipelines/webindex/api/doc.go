// Package api owns the web index's JSON API: Handler serves an Engine's
// pages, searches, lists and links over HTTP, within Limits on the
// results it lists and the requests it serves and queues at once.
//
// It imports query, which answers, and nothing that writes; the web
// index's Index.Handler serves it with the limits of its Options, beside
// the HTML of package ui.
package api
