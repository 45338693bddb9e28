package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: clock ticks of
// 1/100 s (USER_HZ, fixed at 100 in the Linux ABI).
const userHZ = 100

// procStat is what /proc/PID/stat says of a process's CPU time.
type procStat struct {
	ppid int
	// cpu is utime + stime + cutime + cstime in ticks: the process's own
	// time and that of the children it has reaped.
	cpu uint64
}

// parseProcStat reads a /proc/PID/stat line. The command name is in
// parentheses and may hold spaces and parentheses itself, so the fields
// are counted from the last ')'.
func parseProcStat(line []byte) (procStat, error) {
	var st procStat
	end := bytes.LastIndexByte(line, ')')
	if end < 0 {
		return st, errors.New("no command name")
	}
	f := bytes.Fields(line[end+1:])
	// f[0] is field 3 (state): ppid is field 4, utime to cstime 14 to 17.
	if len(f) < 15 {
		return st, errors.New("too few fields")
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return st, fmt.Errorf("ppid: %w", err)
	}
	var cpu uint64
	for _, i := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			// Nothing of a line that does not parse whole is used.
			return procStat{}, fmt.Errorf("field %d: %w", i+3, err)
		}
		cpu += v
	}
	st.ppid, st.cpu = ppid, cpu
	return st, nil
}

// processTreeCPU is the CPU time of process pid and its descendants so
// far: every live process of the tree (threads included) plus the
// children each has reaped, so a server that forks workers (nginx, a
// Tongsuo s_server with -WWW) is measured whole.
func processTreeCPU(pid int) (time.Duration, error) {
	return processTreeCPUIn("/proc", pid)
}

func processTreeCPUIn(proc string, pid int) (time.Duration, error) {
	root, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("server PID %d: no such process (or no /proc on this system)", pid)
		}
		return 0, fmt.Errorf("server PID %d: %w", pid, err)
	}
	rootStat, err := parseProcStat(root)
	if err != nil {
		return 0, fmt.Errorf("server PID %d: reading its stat: %w", pid, err)
	}
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0, err
	}
	stats := map[int]procStat{pid: rootStat}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		line, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // it exited meanwhile
		}
		st, err := parseProcStat(line)
		if err != nil {
			continue
		}
		stats[p] = st
		children[st.ppid] = append(children[st.ppid], p)
	}
	var ticks uint64
	seen := map[int]bool{}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		ticks += stats[p].cpu
		queue = append(queue, children[p]...)
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
