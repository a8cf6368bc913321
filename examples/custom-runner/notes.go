package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/trickle-dev/trickle/framework"
)

// maxNote bounds a note's text, so that a request cannot make a cell of
// any size.
const maxNote = 64 << 10

// mountNotes serves the notes on mux: PUT /notes?id=ID writes a note's
// text (an empty body deletes it), GET /notes lists every note with what
// the observer made of it and the count, and / says so.
func mountNotes(mux *http.ServeMux, db *framework.DB) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "custom-runner: the shouter observer keeps each note's shout column and the count of notes.")
		fmt.Fprintln(w, "PUT /notes?id=ID with the text as the body writes a note (an empty body deletes it);")
		fmt.Fprintln(w, "GET /notes lists the notes, their shouts and the count; /metrics serves the runner's metrics.")
	})
	mux.HandleFunc("PUT /notes", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		if id == "" {
			http.Error(w, "missing id parameter: PUT /notes?id=ID", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxNote))
		if err != nil {
			http.Error(w, fmt.Sprintf("note %s: %v (at most %d bytes)", id, err, maxNote), http.StatusRequestEntityTooLarge)
			return
		}
		err = db.Update(r.Context(), func(ctx context.Context, tx *framework.Txn) error {
			if len(body) == 0 {
				return tx.Delete("notes", []byte(id), text)
			}
			return tx.Set("notes", []byte(id), text, body)
		})
		if err != nil {
			http.Error(w, fmt.Sprintf("writing note %s: %v", id, err), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /notes", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		err := db.View(r.Context(), func(ctx context.Context, tx *framework.Txn) error {
			b.Reset()
			for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: "notes", Columns: []framework.Column{text, shout}}) {
				if err != nil {
					return err
				}
				fmt.Fprintf(&b, "%s\t%s\t%q\n", e.Row, e.Column.Qualifier, e.Value)
			}
			v, err := tx.Get(ctx, "stats", statRow, total)
			if errors.Is(err, framework.ErrNotFound) {
				v, err = []byte("0"), nil
			}
			fmt.Fprintf(&b, "notes\t%s\n", v)
			return err
		})
		if err != nil {
			http.Error(w, fmt.Sprintf("reading the notes: %v", err), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, b.String())
	})
}
