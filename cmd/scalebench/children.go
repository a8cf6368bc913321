package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
)

// binaries returns the directory of the loader and runner to measure,
// building them from this module unless -bin names one.
func (b *bench) binaries(ctx context.Context) (string, error) {
	if b.cfg.bin != "" {
		for _, name := range []string{"loader", "runner"} {
			if _, err := os.Stat(filepath.Join(b.cfg.bin, name)); err != nil {
				return "", fmt.Errorf("-bin: %w", err)
			}
		}
		return b.cfg.bin, nil
	}
	dir := filepath.Join(b.cfg.work, "bin")
	b.log.Info("building the loader and the runner", "into", dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "github.com/trickle-dev/trickle/cmd/loader", "github.com/trickle-dev/trickle/cmd/runner")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the loader and the runner (run from the module, or pass -bin): %w", err)
	}
	return dir, nil
}

// generate writes n generated pages to pagesFile and the generator's step
// of them to changesFile, returning the number of changes. The corpus is
// dropped before the children run, so that its memory is not the
// machine's any more.
func generate(seed int64, n int, step float64, pagesFile, changesFile string) (int, error) {
	c := sample.Generate(seed, n)
	if err := writeFile(pagesFile, c.WriteJSONL); err != nil {
		return 0, err
	}
	changes := c.Step(seed+1, step)
	err := writeFile(changesFile, func(w io.Writer) error { return sample.WriteChanges(w, changes) })
	debug.FreeOSMemory() // the corpus is garbage now: give its memory back
	return len(changes), err
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// generateApart runs the generation in a child process (this command
// with -generate-only): a child's peak resident set, as wait4 reports it,
// counts its parent's peak from before it exec'd, and the generator's
// corpus takes gigabytes at a million pages.
func (b *bench) generateApart(ctx context.Context) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	args := []string{"-generate-only", "-pages", strconv.Itoa(b.cfg.pages), "-seed", strconv.FormatInt(b.cfg.seed, 10),
		"-step", strconv.FormatFloat(b.cfg.step, 'g', -1, 64), "-work", b.cfg.work}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("generating: %w", err)
	}
	var pages, changes int
	var size int64
	if _, err := fmt.Sscanf(string(out), "%d pages (%d bytes) and %d changes", &pages, &size, &changes); err != nil {
		return 0, fmt.Errorf("generating: %q: %w", out, err)
	}
	return changes, nil
}

// bulkLoad runs `loader -bulk` into the empty data directory and records
// its wall time, CPU time and peak resident set.
func (b *bench) bulkLoad(ctx context.Context, bin, data, pagesFile string, r *report) error {
	args := []string{"-bulk", "-data", data, "-jsonl", pagesFile, "-progress", "0"}
	if b.cfg.bulkMemory != "" {
		args = append(args, "-bulk-memory", b.cfg.bulkMemory)
	}
	b.log.Info("bulk loading", "args", args)
	began := time.Now()
	ru, err := b.runChild(ctx, filepath.Join(bin, "loader"), "bulk", args...)
	if err != nil {
		return err
	}
	r.bulkWall = time.Since(began)
	r.bulkCPU = cpu(ru)
	r.bulkRSS = ru.Maxrss << 10 // kilobytes on Linux
	b.log.Info("bulk load done", "wall", r.bulkWall, "cpu", r.bulkCPU, "peak_rss", r.bulkRSS)
	return nil
}

// runChild runs a command to its end, its output in a log file, and
// returns its resource usage.
func (b *bench) runChild(ctx context.Context, path, logName string, args ...string) (*syscall.Rusage, error) {
	out, err := b.logFile(logName)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w (see %s)", filepath.Base(path), strings.Join(args, " "), err, out.Name())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return nil, errors.New("no resource usage for a child on this system")
	}
	return ru, nil
}

func (b *bench) logFile(name string) (*os.File, error) {
	dir := b.cfg.logDir
	if dir == "" {
		dir = b.cfg.work
	}
	return os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

func cpu(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stepAndSearch starts a runner on the bulk-loaded data, loads the step's
// changes page by page through it, waits for the index to settle, and
// measures the runner's CPU meanwhile; then runs the queries.
func (b *bench) stepAndSearch(ctx context.Context, bin, data, changesFile string, r *report) error {
	httpPort, err := freePort()
	if err != nil {
		return err
	}
	natsPort, err := freePort()
	if err != nil {
		return err
	}
	out, err := b.logFile("runner")
	if err != nil {
		return err
	}
	defer out.Close()
	addr := "127.0.0.1:" + strconv.Itoa(httpPort)
	// No garbage collection of old versions: the step's CPU is the
	// change's own.
	runner := exec.Command(filepath.Join(bin, "runner"), "run", "-data", data, "-http", addr, "-nats-port", strconv.Itoa(natsPort), "-gc-interval", "-1s", "-gc-settled-after", "-1")
	runner.Stdout, runner.Stderr = out, out
	if err := runner.Start(); err != nil {
		return err
	}
	defer func() {
		runner.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { runner.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			runner.Process.Kill()
			<-done
		}
	}()
	base := "http://" + addr
	if err := waitHTTP(ctx, base+"/api/top?n=1", 2*time.Minute); err != nil {
		return fmt.Errorf("the runner did not come up (see %s): %w", out.Name(), err)
	}
	if _, err := b.runChild(ctx, filepath.Join(bin, "runner"), "wait", "wait", "-data", data); err != nil {
		return err
	}
	before, err := procCPU(runner.Process.Pid)
	if err != nil {
		return err
	}
	b.log.Info("loading the step through the runner", "changes", r.changes)
	profiled := b.profileStep(ctx, base)
	began := time.Now()
	ru, err := b.runChild(ctx, filepath.Join(bin, "loader"), "step", "-data", data, "-jsonl", changesFile, "-progress", "0")
	if err != nil {
		return err
	}
	r.loaderStepCPU = cpu(ru)
	if _, err := b.runChild(ctx, filepath.Join(bin, "runner"), "wait", "wait", "-data", data); err != nil {
		return err
	}
	r.stepWall = time.Since(began)
	after, err := procCPU(runner.Process.Pid)
	if err != nil {
		return err
	}
	r.stepCPU = after - before
	b.log.Info("step done", "runner_cpu", r.stepCPU, "wall", r.stepWall)
	if err := <-profiled; err != nil {
		return err
	}
	return b.search(ctx, base, r)
}

// search runs the query set once to warm the caches, then again, timed.
func (b *bench) search(ctx context.Context, base string, r *report) error {
	qs := querySet(b.cfg.seed, b.cfg.queries)
	var lat []time.Duration
	var matches int
	for pass := range 2 {
		for _, q := range qs {
			began := time.Now()
			total, err := searchOnce(ctx, base, q)
			if err != nil {
				return err
			}
			if pass == 1 {
				lat = append(lat, time.Since(began))
				matches += total
			}
		}
	}
	r.queries, r.matchesMean = len(qs), matches/len(qs)
	r.p50, r.p99 = percentile(lat, 50), percentile(lat, 99)
	return nil
}

func searchOnce(ctx context.Context, base, q string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/search?limit=10&q="+url.QueryEscape(q), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("search %q: %s: %s", q, resp.Status, bytes.TrimSpace(body))
	}
	var page struct {
		Total int `json:"total"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return 0, fmt.Errorf("search %q: %w", q, err)
	}
	return page.Total, nil
}

// querySet is n queries of 1 to 3 distinct words among the generator's
// 25 most frequent, the same for a seed.
func querySet(seed int64, n int) []string {
	rng := rand.New(rand.NewPCG(uint64(seed), 40))
	out := make([]string, n)
	for i := range out {
		var words []string
		for k := 1 + rng.IntN(3); len(words) < k; {
			if w := sample.Word(rng.IntN(25)); !slices.Contains(words, w) {
				words = append(words, w)
			}
		}
		out[i] = strings.Join(words, " ")
	}
	return out
}

// percentile is the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}

// procCPU reads a process's user and system CPU time from /proc.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// clockTicks is the kernel's USER_HZ, 100 on every Linux that runs this.
const clockTicks = 100

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line; the command name, in parentheses, may hold spaces.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	// After the name: state (3), ..., utime (14), stime (15).
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls u until it answers 200.
func waitHTTP(ctx context.Context, u string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s after %v: %v", u, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// profileStep starts fetching a CPU profile of the runner at base, over
// the first -step-profile-for of the step, into -step-profile; the
// channel reports how that went (at once nil, without -step-profile).
func (b *bench) profileStep(ctx context.Context, base string) <-chan error {
	done := make(chan error, 1)
	if b.cfg.stepProfile == "" {
		done <- nil
		return done
	}
	secs := max(1, int(b.cfg.stepProfileFor.Seconds()))
	go func() {
		done <- func() error {
			ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+time.Minute)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("profiling the runner: %w", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("profiling the runner: %s", resp.Status)
			}
			f, err := os.Create(b.cfg.stepProfile)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				f.Close()
				return fmt.Errorf("writing %s: %w", b.cfg.stepProfile, err)
			}
			return f.Close()
		}()
	}()
	return done
}
