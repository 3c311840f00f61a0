package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	fixture "configbundle.dev/hub/internal/testing/fleet"
)

// metrics are the hub's Prometheus metrics at one moment.
type metrics map[string]*dto.MetricFamily

// scrape reads and parses the metrics of the hub process serving them on addr.
func scrape(addr string) (metrics, error) {
	text, err := fixture.Scrape(addr)
	if err != nil {
		return nil, fmt.Errorf("scraping the hub: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing the hub's metrics: %w", err)
	}
	return families, nil
}

// sum adds up a counter or gauge over the series whose labels match (nil: all).
func (m metrics) sum(name string, match func(labels map[string]string) bool) float64 {
	f, ok := m[name]
	if !ok {
		return 0
	}
	var total float64
	for _, s := range f.GetMetric() {
		if match != nil && !match(labelsOf(s)) {
			continue
		}
		switch {
		case s.Counter != nil:
			total += s.GetCounter().GetValue()
		case s.Gauge != nil:
			total += s.GetGauge().GetValue()
		}
	}
	return total
}

// labelsOf returns a series' labels by name.
func labelsOf(s *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range s.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// cpuSeconds is a process's user and system CPU time.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields start after the closing parenthesis.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// rssBytes is a process's resident set size.
func rssBytes(pid int) (float64, error) { return procStatusBytes(pid, "VmRSS") }

// peakRSSBytes is the largest resident set size a process had.
func peakRSSBytes(pid int) (float64, error) { return procStatusBytes(pid, "VmHWM") }

// procStatusBytes reads a field of a process's /proc/<pid>/status given in kB, in bytes.
func procStatusBytes(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s for pid %d", field, pid)
}

func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(strings.SplitN(string(data), "\n", 2)[0], "MemTotal: %f kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", kb/1024/1024)
		}
	}
	return fmt.Sprintf("%d cores (%s)%s, %s", runtime.NumCPU(), model, mem, runtime.Version())
}

// latencies are heal latencies.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/1024/1024) }

// print writes the results as tables.
func (r *results) print(w io.Writer, cfg benchConfig) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("\nConfigBundle Hub benchmark — %s — %s", time.Now().UTC().Format("2006-01-02 15:04 MST"), r.Machine)
	if cfg.RolloutOnly {
		r.printRollout(p, cfg)
		return
	}
	if cfg.PlacementOnly {
		r.printPlacement(p, cfg)
		return
	}
	if cfg.HistoryOnly {
		r.printHistory(p, cfg)
		return
	}
	if cfg.RestartOnly {
		r.printRestart(p)
		return
	}
	if cfg.HealOnly {
		r.printHeal(p, cfg)
		r.printConvergence(p, cfg)
		return
	}
	if !cfg.ScaleOnly {
		r.printHeal(p, cfg)
		r.printBacklog(p)
		r.printRestart(p)
		r.printConvergence(p, cfg)
		r.printCost(p)
		r.printJoin(p, cfg)
		r.printPlacement(p, cfg)
		r.printHubOutage(p)
		r.printRollout(p, cfg)
		r.printHistory(p, cfg)
	}
	r.printScale(p, cfg)
}

type printer func(format string, args ...any)

func (r *results) printConvergence(p printer, cfg benchConfig) {
	p("\n2. Convergence: %d bundles over %d members (writes counted by the API servers)", r.Bundles, cfg.ThroughputMembers)
	p("| all Ready after | bundles/s | hub writes to members per bundle | of which create / update / patch / delete | hub writes to the hub cluster | writes in %s of steady state (members / hub: planned + unplanned) | hub CPU in steady state |", cfg.Quiet)
	p("|---|---|---|---|---|---|---|")
	bps := 0.0
	if r.ConvergeTime > 0 {
		bps = float64(r.Bundles) / r.ConvergeTime.Seconds()
	}
	members, planned, unplannedHub := r.Steady.counts()
	p("| %s | %.0f | %.2f | %.2f / %.2f / %.2f / %.2f | %d | %d / %d + %d | %.2f%% of a core |", r.ConvergeTime.Round(100*time.Millisecond), bps,
		r.WritesPerBundle, r.WritesByVerb["create"], r.WritesByVerb["update"], r.WritesByVerb["patch"], r.WritesByVerb["delete"],
		r.ConvergeHubWrites, members, planned, unplannedHub, 100*r.SteadyCPU)
	r.printSteady(p)
	if len(r.SteadyReconciles) > 0 {
		slices.Sort(r.SteadyReconciles)
		p("steady-state reconciles by result: %s", strings.Join(r.SteadyReconciles, ", "))
	}
}

func (r *results) printCost(p printer) {
	p("\n3. Cost (hub process)")
	p("| members | bundles | unmanaged ConfigMaps | RSS | Go heap in use | goroutines |")
	p("|---|---|---|---|---|---|")
	for _, c := range append(slices.Clone(r.Cost), r.CostWithBundles, r.CostUnmanaged) {
		p("| %d | %d | %d | %s | %s | %.0f |", c.Members, c.Bundles, c.Unmanaged, mib(c.RSS), mib(c.Heap), c.Goroutines)
	}
	if n := len(r.Cost); n >= 2 {
		a, b := r.Cost[0], r.Cost[n-1]
		dm := float64(b.Members - a.Members)
		p("per empty member: %s RSS, %s heap, %.1f goroutines", mib((b.RSS-a.RSS)/dm), mib((b.Heap-a.Heap)/dm), (b.Goroutines-a.Goroutines)/dm)
	}
	if r.CostWithBundles.Bundles > 0 {
		db := float64(r.CostWithBundles.Bundles)
		p("per managed bundle: %.1f KiB RSS, %.1f KiB heap", (r.CostWithBundles.RSS-r.EmptyBaseline.RSS)/db/1024, (r.CostWithBundles.Heap-r.EmptyBaseline.Heap)/db/1024)
	}
	if r.CostUnmanaged.Unmanaged > 0 {
		du := float64(r.CostUnmanaged.Unmanaged)
		p("per unmanaged ConfigMap (1 KiB of data each): %.2f KiB RSS, %.2f KiB heap", (r.CostUnmanaged.RSS-r.CostWithBundles.RSS)/du/1024, (r.CostUnmanaged.Heap-r.CostWithBundles.Heap)/du/1024)
	}
}

func (r *results) printJoin(p printer, cfg benchConfig) {
	p("\n4. Join with %d black-holed members registered", cfg.BlackHoles)
	j := latencies(r.JoinTimes)
	p("| members joined | Secret -> MemberCluster Ready p50 | p90 | max | black holes not Ready |")
	p("|---|---|---|---|---|")
	p("| %d | %s | %s | %s | %d of %d |", len(j), ms(j.pct(50)), ms(j.pct(90)), ms(j.pct(100)), r.Unreachable, cfg.BlackHoles)
	hubErrors, floorErrors := r.IsolatedHealErrors, 0
	for _, round := range r.Rounds {
		hubErrors, floorErrors = hubErrors+round.HubErrors, floorErrors+round.FloorErrors
	}
	p("\nall drifts healed: %v (hub errors %d, floor errors %d)", r.HealedAllDrifts, hubErrors, floorErrors)
	if !r.Steady.silent() {
		p("FAIL: steady state is not silent: %d unplanned writes of the hub (listed under 2. Convergence)", len(r.Steady.Unplanned))
	}
}
