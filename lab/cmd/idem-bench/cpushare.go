package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// The quota cgroup of -cpu-share: a quota of share × cfsPeriodUS per period, at least the
// kernel's minimum, in a cgroup at the root of cgroup v1's cpu hierarchy if it is mounted,
// else of cgroup v2's.
const (
	cfsPeriodUS = 100000
	minQuotaUS  = 1000
	cgroupV1    = "/sys/fs/cgroup/cpu"
	cgroupV2    = "/sys/fs/cgroup"
)

// errNoCgroup is returned when no quota cgroup can be made.
var errNoCgroup = errors.New("idem-bench: -cpu-share needs a writable cpu cgroup (root)")

// quotaUS returns the CFS quota of share, or an error if the kernel would refuse it or the
// share is above 2 CPUs.
func quotaUS(share float64) (int, error) {
	if !(share*cfsPeriodUS >= minQuotaUS && share <= 2) { // also NaN
		return 0, fmt.Errorf("idem-bench: -cpu-share %g: want a share of one CPU in [%g, 2]", share, float64(minQuotaUS)/cfsPeriodUS)
	}
	return int(math.Round(share * cfsPeriodUS)), nil
}

// confine moves this process (all its threads) into a new cgroup, idem-bench-<pid>, whose
// CFS quota is share of one CPU per 100 ms period. Processes started before, such as
// DynamoDB Local, stay where they are. undo moves this process to the hierarchy's root
// cgroup and removes the new one.
func confine(share float64) (undo func() error, err error) {
	quota, err := quotaUS(share)
	if err != nil {
		return nil, err
	}
	root := cgroupV1
	limits := [][2]string{{"cpu.cfs_period_us", strconv.Itoa(cfsPeriodUS)}, {"cpu.cfs_quota_us", strconv.Itoa(quota)}}
	if _, err := os.Stat(filepath.Join(cgroupV1, "cpu.cfs_quota_us")); err != nil {
		root, limits = cgroupV2, [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quota, cfsPeriodUS)}}
		if err := write(root, "cgroup.subtree_control", "+cpu"); err != nil {
			return nil, fmt.Errorf("%w: %w", errNoCgroup, err)
		}
	}
	pid := strconv.Itoa(os.Getpid())
	dir := filepath.Join(root, "idem-bench-"+pid)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", errNoCgroup, err)
	}
	undo = func() error {
		return errors.Join(write(root, "cgroup.procs", pid), os.Remove(dir))
	}
	for _, l := range append(limits, [2]string{"cgroup.procs", pid}) {
		if err := write(dir, l[0], l[1]); err != nil {
			return nil, errors.Join(err, undo())
		}
	}
	return undo, nil
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("idem-bench: write %q to %s: %w", value, file, err)
	}
	return nil
}
