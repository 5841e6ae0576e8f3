package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// counters counts what the DynamoDB client sends, through middleware on every call.
type counters struct {
	mu     sync.Mutex
	byOp   map[string]int64
	calls  atomic.Int64
	tries  atomic.Int64
	ccf    atomic.Int64
	reqLen atomic.Int64
}

func newCounters() *counters { return &counters{byOp: make(map[string]int64)} }

// apiOption adds the counting middleware to a client's stack: the Initialize step sees
// each call once, before retries; the Finalize step, in front of the retry middleware, sees
// the serialized body once per call; the Deserialize step sees every HTTP attempt.
func (c *counters) apiOption(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("idemBenchCalls", c.countCall), middleware.Before); err != nil {
		return err
	}
	if err := stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("idemBenchBytes", c.countBytes), "Retry", middleware.Before); err != nil {
		return err
	}
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("idemBenchAttempts", c.countAttempt), middleware.Before)
}

func (c *counters) countCall(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	op := awsmiddleware.GetOperationName(ctx)
	c.calls.Add(1)
	c.mu.Lock()
	c.byOp[op]++
	c.mu.Unlock()
	out, md, err := next.HandleInitialize(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		c.ccf.Add(1)
	}
	c.ccf.Add(statementConditionFailures(out.Result))
	return out, md, err
}

// statementConditionFailures counts the failed conditions reported per statement inside a
// successful BatchExecuteStatement response: ConditionalCheckFailed, and DuplicateItem,
// which is how a PartiQL INSERT reports the key already taken (its implied condition).
func statementConditionFailures(result any) int64 {
	out, ok := result.(*dynamodb.BatchExecuteStatementOutput)
	if !ok || out == nil {
		return 0
	}
	var n int64
	for _, r := range out.Responses {
		if r.Error == nil {
			continue
		}
		switch r.Error.Code {
		case types.BatchStatementErrorCodeEnumConditionalCheckFailed, types.BatchStatementErrorCodeEnumDuplicateItem:
			n++
		}
	}
	return n
}

func (c *counters) countBytes(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		n := req.ContentLength
		if n <= 0 {
			n, _, _ = req.StreamLength()
		}
		c.reqLen.Add(max(n, 0))
	}
	return next.HandleFinalize(ctx, in)
}

func (c *counters) countAttempt(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	c.tries.Add(1)
	return next.HandleDeserialize(ctx, in)
}

// callCounts is a copy of the counters at one instant.
type callCounts struct {
	calls, tries, ccf, reqLen int64
	byOp                      map[string]int64
}

func (c *counters) snapshot() callCounts {
	c.mu.Lock()
	byOp := make(map[string]int64, len(c.byOp))
	for k, v := range c.byOp {
		byOp[k] = v
	}
	c.mu.Unlock()
	return callCounts{calls: c.calls.Load(), tries: c.tries.Load(), ccf: c.ccf.Load(), reqLen: c.reqLen.Load(), byOp: byOp}
}

// cpuTimes are CPU times in milliseconds: total (user and system) and system alone.
type cpuTimes struct{ total, sys float64 }

func (a cpuTimes) sub(b cpuTimes) cpuTimes { return cpuTimes{a.total - b.total, a.sys - b.sys} }

func selfCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	ms := func(tv syscall.Timeval) float64 { return float64(tv.Sec)*1e3 + float64(tv.Usec)/1e3 }
	return cpuTimes{total: ms(ru.Utime) + ms(ru.Stime), sys: ms(ru.Stime)}
}

// processCPU reads utime and stime of pid from /proc/<pid>/stat; zero when pid is 0 or the
// file cannot be read.
func processCPU(pid int) cpuTimes {
	if pid == 0 {
		return cpuTimes{}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return cpuTimes{}
	}
	// The command name may hold spaces; the fields after it are fixed.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return cpuTimes{}
	}
	utime, _ := strconv.ParseFloat(fields[11], 64) // field 14 of proc(5)
	stime, _ := strconv.ParseFloat(fields[12], 64) // field 15
	tick := 1e3 / clockTicks
	return cpuTimes{total: (utime + stime) * tick, sys: stime * tick}
}

// machineBusy returns the busy CPU time of the whole machine from /proc/stat, in
// milliseconds: everything but idle and iowait.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, f := range fields[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest and guest_nice are already counted in user and nice
			break
		}
		v, _ := strconv.ParseFloat(f, 64)
		busy += v
	}
	return busy * 1e3 / clockTicks
}

// meter accumulates the measured regions of one workload.
type meter struct {
	cnt       *counters
	serverPID int

	wall           time.Duration
	calls          callCounts
	client, server cpuTimes
	busy           float64
}

// mark is the state at the start of a measured region.
type mark struct {
	at     time.Time
	calls  callCounts
	client cpuTimes
	server cpuTimes
	busy   float64
}

func newMeter(cnt *counters, serverPID int) *meter {
	return &meter{cnt: cnt, serverPID: serverPID, calls: callCounts{byOp: map[string]int64{}}}
}

func (m *meter) begin() mark {
	return mark{
		calls:  m.cnt.snapshot(),
		client: selfCPU(),
		server: processCPU(m.serverPID),
		busy:   machineBusy(),
		at:     time.Now(), // last, so the reads above are not timed
	}
}

func (m *meter) end(k mark) {
	now := time.Now()
	calls := m.cnt.snapshot()
	client, server, busy := selfCPU(), processCPU(m.serverPID), machineBusy()
	m.wall += now.Sub(k.at)
	m.calls.calls += calls.calls - k.calls.calls
	m.calls.tries += calls.tries - k.calls.tries
	m.calls.ccf += calls.ccf - k.calls.ccf
	m.calls.reqLen += calls.reqLen - k.calls.reqLen
	for op, n := range calls.byOp {
		if d := n - k.calls.byOp[op]; d > 0 {
			m.calls.byOp[op] += d
		}
	}
	c, s := client.sub(k.client), server.sub(k.server)
	m.client.total += c.total
	m.client.sys += c.sys
	m.server.total += s.total
	m.server.sys += s.sys
	m.busy += busy - k.busy
}
