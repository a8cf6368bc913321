// Command webindex-postgres queries the web index's canonical table where
// runner -export postgres keeps it, with nothing of this project's but the
// table's documented schema: a PostgreSQL client asking what a serving
// system would — the best-linked pages, or the pages whose title holds a
// word.
//
//	webindex-postgres -dsn postgres://app@db.example:5432/app            the 10 best-linked canonical pages
//	webindex-postgres -dsn ... -title install -limit 20                  canonical pages whose title holds "install"
//
// The DSN also comes from TRICKLE_EXPORT_DSN, as the runner reads it. The
// query, in SQL:
//
//	SELECT key, value->>'title', (value->>'inbound_count')::bigint
//	FROM webindex_export
//	WHERE NOT deleted AND key = value->>'canonical' [AND value->>'title' ILIKE '%word%']
//	ORDER BY 3 DESC, key LIMIT n
//
// It exits 1, naming the server, when the database does not answer within
// -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "webindex-postgres:", err)
		os.Exit(1)
	}
}

// query is the table's best-linked canonical pages, optionally those whose
// title holds a word ($1, empty for any).
const query = `SELECT key, coalesce(value->>'title', ''), coalesce((value->>'inbound_count')::bigint, 0)
FROM %s
WHERE NOT deleted AND key = value->>'canonical' AND ($1 = '' OR value->>'title' ILIKE '%%' || $1 || '%%')
ORDER BY 3 DESC, key
LIMIT $2`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webindex-postgres", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", os.Getenv("TRICKLE_EXPORT_DSN"), "the PostgreSQL connection string (default: TRICKLE_EXPORT_DSN)")
	table := fs.String("table", "webindex_export", "the table runner -export postgres writes")
	title := fs.String("title", "", "only pages whose title holds this text (case-insensitive)")
	limit := fs.Int("limit", 10, "at most this many pages")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on the database after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *dsn == "":
		return errors.New("-dsn (or TRICKLE_EXPORT_DSN) is required")
	case *limit < 1:
		return fmt.Errorf("-limit %d: want at least 1", *limit)
	case !validTable(*table):
		return fmt.Errorf("-table %q: want lower-case letters, digits and _, optionally schema.name", *table)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(*dsn)
	if err != nil {
		return fmt.Errorf("-dsn: %w", err)
	}
	where := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL at %s: %w", where, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, fmt.Sprintf(query, *table), *title, *limit)
	if err != nil {
		return fmt.Errorf("querying %s at %s: %w", *table, where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var url, t string
		var inbound int64
		if err := rows.Scan(&url, &t, &inbound); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%6d  %s  %s\n", inbound, url, t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading %s at %s: %w", *table, where, err)
	}
	return nil
}

// validTable reports whether name is a table name the query may hold as
// it is: lower-case letters, digits and _, optionally schema.name.
func validTable(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || p[0] >= '0' && p[0] <= '9' {
			return false
		}
		for _, r := range p {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
				return false
			}
		}
	}
	return true
}
