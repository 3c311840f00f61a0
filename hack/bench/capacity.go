package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
)

// The capacity probe (--scale-capacity) adds slim members in steps and measures what they cost
// the machine while idle, until a limit: the most members this machine can host.
const (
	// capacitySettle is how long a step's members idle before they are measured;
	// capacityWindow how long their CPU is counted.
	capacitySettle, capacityWindow = 20 * time.Second, 30 * time.Second
	// capacityMemReserve is the memory left to everything else (the hub, the benchmark, other
	// work on the machine): the probe stops before MemAvailable falls under it.
	capacityMemReserve = 6 << 30
	// capacityCPUBudget is the share of the machine's cores the idle members may use: the rest
	// is for the hub's work and the benchmark's.
	capacityCPUBudget = 0.5
)

// capacityRow is the machine with the members of one step running and idle.
type capacityRow struct {
	Members   int
	StartTook time.Duration // starting this step's members
	machineLoad
}

// machineLoad is what the members cost the machine, and the machine's load, over a window.
type machineLoad struct {
	// APIServerRSS and APIServerAnon are the means over the kube-apiservers.
	APIServerRSS, APIServerAnon, EtcdRSS, MemAvailable float64
	// FleetCores are the cores the kube-apiservers and the etcd used, MachineCores all of the
	// machine's busy cores (other work included), both on average over the window.
	FleetCores, MachineCores float64
	// FDs are the open files of the kube-apiservers and the etcd.
	FDs int
}

// capacityResult is the probe's rows and the limit that ended it.
type capacityResult struct {
	Rows  []capacityRow
	Limit string
}

// runCapacity adds cfg.CapacityStep slim members at a time, up to cfg.Capacity, and measures
// each step idle; it stops early at the first limit: a start that fails, memory under the
// reserve, or the idle members over the CPU budget.
func runCapacity(ctx context.Context, cfg benchConfig, say func(string, ...any)) (*capacityResult, error) {
	shared, err := startShared(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = shared.Stop() }()
	res := &capacityResult{Limit: fmt.Sprintf("none up to %d members", cfg.Capacity)}
	for n := 0; n < cfg.Capacity; {
		step := min(cfg.CapacityStep, cfg.Capacity-n)
		say("capacity: starting members %d to %d", n+1, n+step)
		began := time.Now()
		if _, err := shared.Add(ctx, memberNames(n, step)...); err != nil {
			res.Limit = fmt.Sprintf("starting members %d to %d failed: %v", n+1, n+step, err)
			return res, nil
		}
		n += step
		row, err := measureIdle(ctx, shared)
		if err != nil {
			return res, err
		}
		row.StartTook = time.Since(began)
		res.Rows = append(res.Rows, row)
		if limit := capacityLimit(row, step); limit != "" {
			res.Limit = limit
			return res, nil
		}
	}
	return res, nil
}

// capacityLimit names the limit a row reached, if any: the next step would not fit.
func capacityLimit(row capacityRow, step int) string {
	perMember := row.APIServerAnon + row.EtcdRSS/float64(row.Members)
	if row.MemAvailable-float64(step)*perMember < capacityMemReserve {
		return fmt.Sprintf("memory: %s available, %d more members would leave less than %s", mib(row.MemAvailable), step, mib(capacityMemReserve))
	}
	cores := float64(runtime.NumCPU())
	if row.FleetCores*float64(row.Members+step)/float64(row.Members) > capacityCPUBudget*cores {
		return fmt.Sprintf("CPU: the idle members use %.2f of %0.f cores; %d more would use over %.0f%% of the machine",
			row.FleetCores, cores, step, 100*capacityCPUBudget)
	}
	return ""
}

// startShared starts the shared etcd of the slim members, each of which gets the member CRDs
// and logs the writes it serves.
func startShared(ctx context.Context) (*controlplane.Shared, error) {
	opts, err := sharedOptions()
	if err != nil {
		return nil, err
	}
	shared, err := controlplane.StartShared(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the members' shared etcd: %w", err)
	}
	return shared, nil
}

// sharedOptions are the slim members' options: the member CRDs, the writes they serve logged.
func sharedOptions() (controlplane.SharedOptions, error) {
	crds, err := config.MemberCRDs()
	if err != nil {
		return controlplane.SharedOptions{}, fmt.Errorf("reading the member CRDs: %w", err)
	}
	return controlplane.SharedOptions{CRDs: crds, AuditWrites: true, StartTimeout: 5 * time.Minute, Output: cpOutput}, nil
}

// memberNames names n members from index from: m001, m002, ...
func memberNames(from, n int) []string {
	names := make([]string, 0, n)
	for i := from + 1; i <= from+n; i++ {
		names = append(names, fmt.Sprintf("m%03d", i))
	}
	return names
}

// measureIdle lets the fleet idle, then measures its memory, open files and CPU.
func measureIdle(ctx context.Context, shared *controlplane.Shared) (capacityRow, error) {
	if err := sleepCtx(ctx, capacitySettle); err != nil {
		return capacityRow{}, err
	}
	load, _, err := loadOver(ctx, capacityWindow, shared, nil)
	return capacityRow{Members: len(shared.Planes()), machineLoad: load}, err
}

// loadOver measures the machine over window: the CPU seconds of the members' processes and of
// extra processes (returned one by one), the machine's busy cores; then the members' memory
// and open files.
func loadOver(ctx context.Context, window time.Duration, shared *controlplane.Shared, extra []int) (machineLoad, []float64, error) {
	pids, err := fleetPIDs(shared)
	if err != nil {
		return machineLoad{}, nil, err
	}
	before, err := cpuOf(append(slices.Clone(extra), pids...))
	if err != nil {
		return machineLoad{}, nil, err
	}
	machineBefore, err := readCPUTimes()
	if err != nil {
		return machineLoad{}, nil, err
	}
	if err := sleepCtx(ctx, window); err != nil {
		return machineLoad{}, nil, err
	}
	after, err := cpuOf(append(slices.Clone(extra), pids...))
	if err != nil {
		return machineLoad{}, nil, err
	}
	machineAfter, err := readCPUTimes()
	if err != nil {
		return machineLoad{}, nil, err
	}
	load := machineLoad{MachineCores: busyCores(machineBefore, machineAfter, runtime.NumCPU())}
	extraCPU := make([]float64, len(extra))
	for i := range after {
		if i < len(extra) {
			extraCPU[i] = after[i] - before[i]
		} else {
			load.FleetCores += (after[i] - before[i]) / window.Seconds()
		}
	}
	return load, extraCPU, load.addMemory(pids)
}

// cpuOf reads the CPU seconds of each process.
func cpuOf(pids []int) ([]float64, error) {
	out := make([]float64, len(pids))
	for i, pid := range pids {
		s, err := cpuSeconds(pid)
		if err != nil {
			return nil, fmt.Errorf("reading the CPU time of pid %d: %w", pid, err)
		}
		out[i] = s
	}
	return out, nil
}

// fleetPIDs returns the shared etcd's process id, then every kube-apiserver's.
func fleetPIDs(shared *controlplane.Shared) ([]int, error) {
	pids := []int{shared.EtcdPID()}
	for _, cp := range shared.Planes() {
		pid, err := cp.APIServerPID()
		if err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// addMemory fills in the memory and open files of the etcd (pids[0]) and the kube-apiservers.
func (row *machineLoad) addMemory(pids []int) error {
	for i, pid := range pids {
		m, err := readProcMemory(pid)
		if err != nil {
			return err
		}
		fds, err := openFiles(pid)
		if err != nil {
			return err
		}
		row.FDs += fds
		if i == 0 {
			row.EtcdRSS = m.RSS
			continue
		}
		row.APIServerRSS += m.RSS / float64(len(pids)-1)
		row.APIServerAnon += m.Anon / float64(len(pids)-1)
	}
	var err error
	row.MemAvailable, err = memAvailable()
	return err
}

// print writes the probe's table.
func (c *capacityResult) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("\nCapacity: slim members (real kube-apiservers on one shared etcd) added in steps, idle, no hub (RSS includes the binary's shared pages; anon is what one kube-apiserver alone costs)")
	p("| members | step started in | kube-apiserver RSS (anon), mean | etcd RSS | MemAvailable | idle CPU of the members (cores) | machine busy (cores) | open files |")
	p("|---|---|---|---|---|---|---|---|")
	for _, r := range c.Rows {
		p("| %d | %s | %s (%s) | %s | %s | %.2f | %.2f | %d |", r.Members, r.StartTook.Round(time.Second), mib(r.APIServerRSS), mib(r.APIServerAnon),
			mib(r.EtcdRSS), mib(r.MemAvailable), r.FleetCores, r.MachineCores, r.FDs)
	}
	p("limit: %s", c.Limit)
}
