package main

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cfsPeriodUS is the CFS period of the quota cgroup: the quota is share × this, at least
// minQuotaUS, the kernel's minimum.
const (
	cfsPeriodUS = 100000
	minQuotaUS  = 1000
)

// errNoCgroup is returned when neither a cgroup v1 cpu hierarchy nor a cgroup v2 one with
// the cpu controller can be written.
var errNoCgroup = errors.New("idem-bench: -cpu-share needs a writable cpu cgroup (root)")

// cgroupRoots are where the cpu hierarchies are mounted: cgroup v1's cpu controller, and
// cgroup v2's unified hierarchy. Variables for tests.
var (
	cgroupV1Root = "/sys/fs/cgroup/cpu"
	cgroupV2Root = "/sys/fs/cgroup"
)

// cgroupQuota is this process confined to a CPU quota cgroup of its own, a child of the
// cgroup it was in.
type cgroupQuota struct {
	parent, dir string // absolute paths
	v2          bool
	quotaUS     int64
	serverPID   int
}

func (q *cgroupQuota) String() string {
	s := fmt.Sprintf("in %s, a CFS quota of %d µs per %d µs", q.dir, q.quotaUS, cfsPeriodUS)
	if q.serverPID != 0 {
		s += fmt.Sprintf("; DynamoDB Local (pid %d) stays in %s", q.serverPID, q.parent)
	}
	return s
}

// enterCPUQuota moves this process (its whole thread group) into a new cgroup,
// idem-bench-<pid>, a child of its current cpu cgroup, whose CFS quota is share of one CPU
// per 100 ms period. serverPID (0 for none), started before as a child, must stay in the
// parent: if it does not, the process moves back and an error is returned. It is a
// [throttleFunc].
func enterCPUQuota(share float64, serverPID int) (cpuQuota, error) {
	quota := int64(math.Round(share * cfsPeriodUS))
	if quota < minQuotaUS || quota > 2*cfsPeriodUS {
		return nil, fmt.Errorf("idem-bench: CPU share %g: want a quota in [%d, %d] µs per %d µs", share, minQuotaUS, 2*cfsPeriodUS, cfsPeriodUS)
	}
	q, err := newCgroupQuota()
	if err != nil {
		return nil, err
	}
	q.quotaUS, q.serverPID = quota, serverPID
	if err := os.Mkdir(q.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCgroup, err)
	}
	if q.v2 {
		err = q.write("cpu.max", fmt.Sprintf("%d %d", quota, cfsPeriodUS))
	} else {
		err = errors.Join(q.write("cpu.cfs_period_us", strconv.Itoa(cfsPeriodUS)),
			q.write("cpu.cfs_quota_us", strconv.FormatInt(quota, 10)))
	}
	if err == nil {
		err = q.write("cgroup.procs", strconv.Itoa(os.Getpid()))
	}
	if err == nil {
		err = q.checkPlacement(serverPID)
	}
	if err != nil {
		return nil, errors.Join(err, q.release())
	}
	return q, nil
}

// newCgroupQuota finds the cgroup this process is in, on cgroup v1's cpu hierarchy if it
// is mounted and writable, else on cgroup v2's with the cpu controller enabled for its
// children (enabling it if need be), and names the child cgroup to make.
func newCgroupQuota() (*cgroupQuota, error) {
	name := "idem-bench-" + strconv.Itoa(os.Getpid())
	if _, err := os.Stat(filepath.Join(cgroupV1Root, "cpu.cfs_quota_us")); err == nil {
		rel, err := selfCgroup(false)
		if err != nil {
			return nil, err
		}
		parent := filepath.Join(cgroupV1Root, rel)
		return &cgroupQuota{parent: parent, dir: filepath.Join(parent, name)}, nil
	}
	if _, err := os.Stat(filepath.Join(cgroupV2Root, "cgroup.controllers")); err != nil {
		return nil, errNoCgroup
	}
	rel, err := selfCgroup(true)
	if err != nil {
		return nil, err
	}
	parent := filepath.Join(cgroupV2Root, rel)
	controllers, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil || !hasWord(string(controllers), "cpu") {
		return nil, fmt.Errorf("%w: no cpu controller in %s", errNoCgroup, parent)
	}
	subtree, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCgroup, err)
	}
	if !hasWord(string(subtree), "cpu") {
		// Fails on a non-root cgroup that holds processes (no internal processes).
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			return nil, fmt.Errorf("%w: enable +cpu in %s: %v", errNoCgroup, parent, err)
		}
	}
	return &cgroupQuota{parent: parent, dir: filepath.Join(parent, name), v2: true}, nil
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// selfCgroup returns the path of this process's cgroup: on the v1 hierarchy with the cpu
// controller, or on the v2 one.
func selfCgroup(v2 bool) (string, error) {
	return procCgroup("self", v2)
}

// procCgroup returns the cgroup path of process pid ("self" for this one) from
// /proc/<pid>/cgroup: on the v1 hierarchy whose controllers include cpu, or on the v2 one
// (hierarchy 0, no controllers).
func procCgroup(pid string, v2 bool) (string, error) {
	f, err := os.Open("/proc/" + pid + "/cgroup")
	if err != nil {
		return "", fmt.Errorf("idem-bench: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		id, rest, _ := strings.Cut(sc.Text(), ":")
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if v2 && id == "0" && ctrls == "" {
			return path, nil
		}
		if !v2 && hasWord(strings.ReplaceAll(ctrls, ",", " "), "cpu") {
			return path, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("idem-bench: %w", err)
	}
	return "", fmt.Errorf("%w: no cpu cgroup in /proc/%s/cgroup", errNoCgroup, pid)
}

// checkPlacement checks that this process is in q.dir and the server (if any) is not.
func (q *cgroupQuota) checkPlacement(serverPID int) error {
	root := cgroupV1Root
	if q.v2 {
		root = cgroupV2Root
	}
	self, err := selfCgroup(q.v2)
	if err != nil {
		return err
	}
	if filepath.Join(root, self) != q.dir {
		return fmt.Errorf("idem-bench: moved to %s but /proc/self/cgroup says %s", q.dir, self)
	}
	if serverPID == 0 {
		return nil
	}
	srv, err := procCgroup(strconv.Itoa(serverPID), q.v2)
	if err != nil {
		return err
	}
	if filepath.Join(root, srv) == q.dir {
		return fmt.Errorf("idem-bench: DynamoDB Local (pid %d) moved into the quota cgroup %s with idem-bench", serverPID, q.dir)
	}
	return nil
}

func (q *cgroupQuota) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(q.dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("idem-bench: write %q to %s: %w", value, file, err)
	}
	return nil
}

// stats reads the CFS throttling of q from cpu.stat: the periods in which the quota ran
// out and the time throttled (v1: nr_throttled, throttled_time in ns; v2: nr_throttled,
// throttled_usec).
func (q *cgroupQuota) stats() (periods int64, throttledMS float64) {
	b, err := os.ReadFile(filepath.Join(q.dir, "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, " ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "nr_throttled":
			periods = n
		case "throttled_time":
			throttledMS = float64(n) / 1e6
		case "throttled_usec":
			throttledMS = float64(n) / 1e3
		}
	}
	return periods, throttledMS
}

// release moves this process back to the parent cgroup and removes q's.
func (q *cgroupQuota) release() error {
	var errs []error
	if err := os.WriteFile(filepath.Join(q.parent, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		errs = append(errs, fmt.Errorf("idem-bench: move back to %s: %w", q.parent, err))
	}
	if err := os.Remove(q.dir); err != nil {
		errs = append(errs, fmt.Errorf("idem-bench: remove the cgroup: %w", err))
	}
	return errors.Join(errs...)
}
