package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/sicheck"
)

// selfCommand runs this program with args: the orchestrator's runners and
// clients are this binary's node and client commands. (Tests run their
// own binary, which stands in for this one when SICHECK_MAIN is set.)
var selfCommand = func(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "SICHECK_MAIN=1")
	return cmd
}

// proc is a process the orchestrator started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// pid is the process's id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// livenessTTL and lockTTL are the processes' TTLs: short, so that kills
// and pauses show within seconds.
const (
	livenessTTL = 2 * time.Second
	lockTTL     = 3 * time.Second
)

// deployment is the processes mode's state: a data directory, its NATS
// port, its runner and client processes.
type deployment struct {
	cfg   Config
	dir   string
	port  int
	began time.Time

	mu      sync.Mutex
	nodes   []*proc
	clients []*proc
	next    int // the next process number
	fig     figures
}

func (d *deployment) start(name string, args ...string) (*proc, error) {
	cmd := selfCommand(args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sicheck: starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, " msg=gc safe_point=") {
				d.fig.gcRounds.Add(1)
			}
			d.cfg.Logger.Debug(line, "process", name)
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

// kill kills the process with SIGKILL and waits until it is gone.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

func (d *deployment) nodeArgs(id string) []string {
	return []string{"node", "-data", d.dir, "-nats-port", strconv.Itoa(d.port), "-worker-id", id,
		"-liveness-ttl", livenessTTL.String(), "-lock-ttl", lockTTL.String(),
		"-gc-interval", max(d.cfg.GCEvery, time.Second).String(), "-gc-lag", d.cfg.GCLag.String()}
}

// startNode starts a runner: the owner if none owns the directory, else
// one that joins it.
func (d *deployment) startNode() error {
	d.mu.Lock()
	d.next++
	id := fmt.Sprintf("node-%d", d.next)
	d.mu.Unlock()
	p, err := d.start(id, d.nodeArgs(id)...)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.nodes = append(d.nodes, p)
	d.mu.Unlock()
	return nil
}

func (d *deployment) clientArgs(p int, bank bool, extra ...string) []string {
	args := []string{"client", "-data", d.dir, "-nats-port", strconv.Itoa(d.port), "-worker-id", fmt.Sprintf("client-%d", p),
		"-liveness-ttl", livenessTTL.String(), "-lock-ttl", lockTTL.String(),
		"-process", strconv.Itoa(p), "-keys", strconv.Itoa(d.cfg.Keys), "-rotate-every", d.cfg.RotateEvery.String()}
	if bank {
		args = append(args, "-bank", "-history", filepath.Join(d.dir, fmt.Sprintf("bank-%d.txt", p)))
	} else {
		args = append(args, "-history", filepath.Join(d.dir, fmt.Sprintf("history-%d.jsonl", p)))
	}
	return append(args, extra...)
}

func (d *deployment) startClient(bank bool) error {
	d.mu.Lock()
	d.next++
	n := d.next
	d.mu.Unlock()
	p, err := d.start(fmt.Sprintf("client-%d", n), d.clientArgs(n, bank)...)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.clients = append(d.clients, p)
	d.mu.Unlock()
	return nil
}

// live returns the processes of list that still run.
func live(list []*proc) []*proc {
	var out []*proc
	for _, p := range list {
		select {
		case <-p.exited:
		default:
			out = append(out, p)
		}
	}
	return out
}

// killClient kills a random client with SIGKILL and starts another in
// its place.
func (d *deployment) killClient() error {
	d.mu.Lock()
	clients := live(d.clients)
	d.mu.Unlock()
	if len(clients) == 0 {
		return nil
	}
	p := clients[rand.IntN(len(clients))]
	p.kill()
	d.fig.clientKills.Add(1)
	return d.startClient(strings.Contains(strings.Join(p.cmd.Args, " "), " -bank"))
}

// owner returns the pid of the process serving the store, as its data
// directory's lock file names it once the store is served (0 if none
// does yet).
func (d *deployment) owner() int {
	data, err := os.ReadFile(filepath.Join(d.dir, "OWNER"))
	if err != nil {
		return 0
	}
	lines := strings.Split(string(data), "\n")
	pid, err := strconv.Atoi(lines[0])
	if err != nil || len(lines) < 2 || lines[1] == "" {
		return 0
	}
	return pid
}

// awaitOwner waits until a process other than not serves the store and
// returns its pid.
func (d *deployment) awaitOwner(ctx context.Context, not int) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pid := d.owner(); pid != 0 && pid != not {
			return pid, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("sicheck: no runner serves the store of %s after 30s (-v shows their logs)", d.dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killOwner kills the runner that serves the store with SIGKILL, waits
// for the runner that joined it to take the store over, and starts a
// runner that joins the new owner.
func (d *deployment) killOwner(ctx context.Context) error {
	pid := d.owner()
	d.mu.Lock()
	nodes := live(d.nodes)
	d.mu.Unlock()
	var owner *proc
	for _, n := range nodes {
		if n.pid() == pid {
			owner = n
		}
	}
	if owner == nil || len(nodes) < 2 {
		return nil // between owners already
	}
	owner.kill()
	d.fig.ownerCrashes.Add(1)
	next, err := d.awaitOwner(ctx, pid)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.pid() == next {
			d.fig.takeovers.Add(1)
		}
	}
	return d.startNode()
}

// pauseClient stops a random client with SIGSTOP long enough for its
// token to expire and a collection to run without it, then resumes it.
func (d *deployment) pauseClient(ctx context.Context) {
	d.mu.Lock()
	clients := live(d.clients)
	d.mu.Unlock()
	if len(clients) == 0 {
		return
	}
	p := clients[rand.IntN(len(clients))]
	p.signal(syscall.SIGSTOP)
	d.fig.pauses.Add(1)
	// The token expires after its TTL (and up to a second late); a round
	// of collection takes two refresh intervals and a second more.
	t := time.NewTimer(2*livenessTTL + max(d.cfg.GCEvery, time.Second) + 2*time.Second)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	p.signal(syscall.SIGCONT)
}

// runProcesses is the processes mode: runners and clients as processes
// of this binary, killed and paused.
func runProcesses(ctx context.Context, cfg Config) (*Result, error) {
	d := &deployment{cfg: cfg, dir: cfg.Dir, began: time.Now()}
	if d.dir == "" {
		dir, err := os.MkdirTemp("", "sicheck-")
		if err != nil {
			return nil, err
		}
		d.dir = dir
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	defer d.stopAll()

	// The first runner owns the store; the second joins it.
	if err := d.startNode(); err != nil {
		return nil, err
	}
	if _, err := d.awaitOwner(ctx, 0); err != nil {
		return nil, err
	}
	if err := d.startNode(); err != nil {
		return nil, err
	}
	for range cfg.Clients {
		if err := d.startClient(false); err != nil {
			return nil, err
		}
	}
	for range cfg.BankClients {
		if err := d.startClient(true); err != nil {
			return nil, err
		}
	}
	if err := d.faults(ctx); err != nil {
		return nil, err
	}
	// Stop the clients between transactions, then read every key.
	d.mu.Lock()
	clients := live(d.clients)
	d.mu.Unlock()
	for _, p := range clients {
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGTERM)
	}
	for _, p := range clients {
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			p.kill()
		}
	}
	d.mu.Lock()
	d.next++
	n := d.next
	d.mu.Unlock()
	final, err := d.start("final", d.clientArgs(n, false, "-final", "-since", strconv.FormatInt(d.began.UnixNano(), 10))...)
	if err != nil {
		return nil, err
	}
	<-final.exited
	if code := final.cmd.ProcessState.ExitCode(); code != 0 {
		return nil, fmt.Errorf("sicheck: the final read failed (exit %d; -v shows its log)", code)
	}
	return d.check()
}

// faults kills and pauses processes until the run's time is up.
func (d *deployment) faults(ctx context.Context) error {
	end := make(chan struct{})
	go func() {
		select {
		case <-time.After(d.cfg.Duration):
		case <-ctx.Done():
		}
		awaitFaults(ctx, d.cfg, &d.fig, true)
		close(end)
	}()
	tick := func(every time.Duration) <-chan time.Time {
		if every <= 0 {
			return nil
		}
		return time.Tick(every)
	}
	kills, owners, pauses := tick(d.cfg.KillEvery), tick(d.cfg.OwnerCrashEvery), tick(d.cfg.PauseEvery)
	var pausing sync.WaitGroup
	defer pausing.Wait()
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end:
			return nil
		case <-kills:
			if err := d.killClient(); err != nil {
				return err
			}
		case <-owners:
			if err := d.killOwner(ctx); err != nil {
				return err
			}
		case <-pauses:
			pausing.Go(func() { d.pauseClient(pctx) })
		}
	}
}

// stopAll kills whatever still runs.
func (d *deployment) stopAll() {
	d.mu.Lock()
	procs := append(live(d.clients), live(d.nodes)...)
	d.mu.Unlock()
	for _, p := range procs {
		p.signal(syscall.SIGCONT)
		p.kill()
	}
}

// check reads every client's history and bank findings and checks them.
func (d *deployment) check() (*Result, error) {
	files, err := filepath.Glob(filepath.Join(d.dir, "history-*.jsonl"))
	if err != nil {
		return nil, err
	}
	h, err := readHistories(files)
	if err != nil {
		return nil, err
	}
	r := &Result{Mode: modeProcesses, Report: sicheck.Check(h), Elapsed: time.Since(d.began)}
	d.fig.fill(r)
	banks, err := filepath.Glob(filepath.Join(d.dir, "bank-*.txt"))
	if err != nil {
		return nil, err
	}
	for _, b := range banks {
		data, err := os.ReadFile(b)
		if err != nil {
			return nil, err
		}
		var transfers, reads int // the last counts the client wrote
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			switch {
			case line == "":
			case strings.HasPrefix(line, "#"):
				_, _ = fmt.Sscanf(line, "# %d transfers, %d snapshots", &transfers, &reads)
			default:
				r.Report.Anomalies = append(r.Report.Anomalies, sicheck.Anomaly{Kind: "bank", Detail: fmt.Sprintf("%s: %s", filepath.Base(b), line)})
			}
		}
		r.BankTransfers += transfers
		r.BankReads += reads
	}
	if r.Report.Valid() && d.cfg.Dir == "" {
		os.RemoveAll(d.dir)
	} else {
		fmt.Fprintf(os.Stderr, "sicheck: the data and histories are in %s\n", d.dir)
	}
	return r, nil
}
