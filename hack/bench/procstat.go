package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procMemory is a process's memory as /proc/<pid>/status gives it, in bytes: its resident set
// and the anonymous part of it (the heap, stacks: what the process alone costs; the rest of
// the resident set is its binary's pages, shared by every process of the same binary).
type procMemory struct {
	RSS, Anon float64
}

// readProcMemory reads a process's VmRSS and RssAnon.
func readProcMemory(pid int) (procMemory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, fmt.Errorf("reading the memory of pid %d: %w", pid, err)
	}
	defer f.Close()
	var m procMemory
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, value, ok := strings.Cut(s.Text(), ":")
		if !ok || (name != "VmRSS" && name != "RssAnon") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return procMemory{}, fmt.Errorf("parsing %s of pid %d: %w", name, pid, err)
		}
		if name == "VmRSS" {
			m.RSS = kb * 1024
		} else {
			m.Anon = kb * 1024
		}
	}
	return m, s.Err()
}

// openFiles counts a process's open file descriptors (sockets included).
func openFiles(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("counting the open files of pid %d: %w", pid, err)
	}
	return len(entries), nil
}

// memAvailable is the machine's MemAvailable, in bytes.
func memAvailable() (float64, error) {
	return meminfo("MemAvailable")
}

// meminfo reads one field of /proc/meminfo, in bytes.
func meminfo(field string) (float64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/meminfo: %w", err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/meminfo", field)
}

// cpuTimes are the machine's CPU times over all cores, in USER_HZ ticks, from /proc/stat.
type cpuTimes struct {
	Busy, Total float64
}

// readCPUTimes reads the first line of /proc/stat: user nice system idle iowait irq softirq
// steal ...; busy is all but idle and iowait.
func readCPUTimes() (cpuTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, fmt.Errorf("reading /proc/stat: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var t cpuTimes
	for i, f := range fields[1:] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("parsing /proc/stat: %w", err)
		}
		t.Total += v
		if i != 3 && i != 4 { // idle, iowait
			t.Busy += v
		}
	}
	return t, nil
}

// busyCores is how many cores were busy on average between two readings.
func busyCores(before, after cpuTimes, cores int) float64 {
	if after.Total <= before.Total {
		return 0
	}
	return (after.Busy - before.Busy) / (after.Total - before.Total) * float64(cores)
}
