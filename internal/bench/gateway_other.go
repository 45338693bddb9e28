//go:build !linux

package bench

func pinPID(int, []int) error { return errNotLinux }
