package input_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/trickle-dev/trickle/loader/input"
)

func ExampleJSONL() {
	feed := `{"url":"https://example.com/","html":"<h1>Hi</h1>"}
{"url":"https://example.com/old","delete":true}
{"html":"no url"}
`
	var stats input.Stats
	for rec, err := range input.JSONL("feed.jsonl", strings.NewReader(feed), input.Options{Stats: &stats}) {
		var bad *input.BadRecord
		switch {
		case errors.As(err, &bad):
			fmt.Println("skipped:", bad)
			continue
		case err != nil:
			fmt.Println("fatal:", err)
			return
		}
		if rec.Delete {
			fmt.Println("delete", rec.URL)
		} else {
			fmt.Printf("upsert %s %q\n", rec.URL, rec.Body)
		}
	}
	fmt.Printf("records=%d bad=%d\n", stats.Records, stats.Bad)
	// Output:
	// upsert https://example.com/ "<h1>Hi</h1>"
	// delete https://example.com/old
	// skipped: input: feed.jsonl: line 3: missing url
	// records=2 bad=1
}
