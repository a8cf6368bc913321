package ui

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// History keeps what the status page charts: samples of each observer's
// backlog and lag and of the serving process's counters, over a window
// (an hour by default). The process that serves the UI adds a sample
// every so often (cmd/runner: every 15 s); the page draws the samples as
// server-rendered SVG, so that a glance shows whether a backlog drains and
// how fast work goes, where the tables show one moment.
type History struct {
	window time.Duration

	mu      sync.Mutex
	samples []Sample
}

// Sample is one moment of the deployment as the status page charts it.
type Sample struct {
	At        time.Time
	Observers []ObserverSample
	// Committed, Runs and Conflicts are the serving process's counters
	// since it started (runner.Stats): transactions committed, observer
	// runs, commits that conflicted. The charts draw their rates.
	Committed, Runs, Conflicts uint64
}

// ObserverSample is one observer's backlog and lag in a Sample.
type ObserverSample struct {
	Name    string
	Pending int
	Lag     time.Duration
}

// maxSamples bounds a History whatever the window and the sampling: an
// hour at one sample a second.
const maxSamples = 3600

// NewHistory returns an empty History over window (0: an hour).
func NewHistory(window time.Duration) *History {
	if window <= 0 {
		window = time.Hour
	}
	return &History{window: window}
}

// Add appends s, dropping the samples older than the window before it
// (and the oldest past maxSamples). Samples must come in time order; one
// older than the last is dropped.
func (h *History) Add(s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.samples); n > 0 && s.At.Before(h.samples[n-1].At) {
		return
	}
	h.samples = append(h.samples, s)
	cut := 0
	for cut < len(h.samples) && s.At.Sub(h.samples[cut].At) > h.window {
		cut++
	}
	cut = max(cut, len(h.samples)-maxSamples)
	h.samples = slices.Delete(h.samples, 0, cut)
}

// Samples returns a copy of the samples kept, oldest first.
func (h *History) Samples() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.samples)
}

// chart is one SVG chart of the status page: series of points over the
// samples' time span, scaled to a box of chartW × chartH.
type chart struct {
	ID, Title, Span string
	Max             string // the value of the top of the box, with its unit
	Series          []series
}

// series is one line of a chart: its points as an SVG polyline's, and its
// last value for the legend.
type series struct {
	Name, Points, Last string
	Class              string // its colour
}

const (
	chartW = 600
	chartH = 100
)

// charts draws samples: each observer's pending cells, each observer's
// lag, and the process's transactions, runs and conflicts per second.
// Fewer than two samples draw nothing.
func charts(samples []Sample) []chart {
	if len(samples) < 2 {
		return nil
	}
	t0, t1 := samples[0].At, samples[len(samples)-1].At
	span := t1.Sub(t0)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return 0
		}
		return chartW * float64(t.Sub(t0)) / float64(span)
	}
	label := "last " + span.Round(time.Second).String()

	var names []string
	for _, s := range samples {
		for _, o := range s.Observers {
			if !slices.Contains(names, o.Name) {
				names = append(names, o.Name)
			}
		}
	}
	slices.Sort(names)
	perObserver := func(id, title string, value func(ObserverSample) float64, format func(float64) string) chart {
		c := chart{ID: id, Title: title, Span: label}
		lines := make([][]point, len(names))
		for _, s := range samples {
			for i, n := range names {
				v := 0.0
				for _, o := range s.Observers {
					if o.Name == n {
						v = value(o)
					}
				}
				lines[i] = append(lines[i], point{x(s.At), v})
			}
		}
		c.Series, c.Max = scale(names, lines, format)
		return c
	}
	pending := perObserver("pending-chart", "Pending cells per observer", func(o ObserverSample) float64 { return float64(o.Pending) },
		func(v float64) string { return fmt.Sprintf("%.0f", v) })
	lag := perObserver("lag-chart", "Lag per observer", func(o ObserverSample) float64 { return o.Lag.Seconds() },
		func(v float64) string {
			return (time.Duration(v * float64(time.Second))).Round(time.Millisecond).String()
		})

	rates := []string{"transactions/s", "observer runs/s", "conflicts/s"}
	lines := make([][]point, len(rates))
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		dt := b.At.Sub(a.At).Seconds()
		if dt <= 0 {
			continue
		}
		for j, d := range []uint64{b.Committed - min(a.Committed, b.Committed), b.Runs - min(a.Runs, b.Runs), b.Conflicts - min(a.Conflicts, b.Conflicts)} {
			lines[j] = append(lines[j], point{x(b.At), float64(d) / dt})
		}
	}
	through := chart{ID: "throughput-chart", Title: "This process: transactions, observer runs and conflicts per second", Span: label}
	through.Series, through.Max = scale(rates, lines, func(v float64) string { return fmt.Sprintf("%.1f/s", v) })
	return []chart{pending, lag, through}
}

type point struct{ x, y float64 }

// scale fits lines into the chart's box, sharing one vertical scale from
// 0 to the largest value (at least 1), and returns the series and the
// top's value as format writes it.
func scale(names []string, lines [][]point, format func(float64) string) ([]series, string) {
	top := 1.0
	for _, l := range lines {
		for _, p := range l {
			top = max(top, p.y)
		}
	}
	out := make([]series, len(names))
	for i, l := range lines {
		var b strings.Builder
		for j, p := range l {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", p.x, chartH-chartH*p.y/top)
		}
		last := ""
		if len(l) > 0 {
			last = format(l[len(l)-1].y)
		}
		out[i] = series{Name: names[i], Points: b.String(), Last: last, Class: fmt.Sprintf("s%d", i%6)}
	}
	return out, format(top)
}
