//go:build !linux

package bench

import (
	"errors"
	"runtime"
	"time"
)

var errNotLinux = errors.New("CPU pinning and CPU accounting of the server need Linux")

func threadCPUTime() time.Duration { return 0 }

func processCPUTime() (user, system time.Duration, err error) {
	return 0, 0, errNotLinux
}

func allowedCPUs() ([]int, error) {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus, nil
}

func processCPUs(int) ([]int, error) { return nil, errNotLinux }

func pinThread(int) (func(), error) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread, nil
}

func pinProcess([]int) error { return errNotLinux }
