package sample

import (
	"fmt"
	"testing"
)

// BenchmarkGenerate measures generating a corpus and rendering every page.
func BenchmarkGenerate(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				bytes := 0
				for d := range Generate(1, n).All() {
					bytes += len(d.HTML)
				}
				b.ReportMetric(float64(bytes)/float64(n), "B/page")
			}
		})
	}
}

// BenchmarkStep measures one 1% Step of a 10k-page corpus.
func BenchmarkStep(b *testing.B) {
	c := Generate(1, 10_000)
	seed := int64(0)
	for b.Loop() {
		seed++
		c.Step(seed, 0.01)
	}
}
