package proctest

import "flag"

// LeaveOutExamples adds ^Example to the running test binary's -test.skip pattern, keeping
// any pattern given, so that m.Run runs no example. A TestMain calls it when the server
// the examples need cannot be had: a test can skip, but an example would fail its output.
func LeaveOutExamples() {
	f := flag.Lookup("test.skip")
	if f == nil {
		return
	}
	pattern := "^Example"
	if v := f.Value.String(); v != "" {
		pattern = v + "|" + pattern
	}
	_ = f.Value.Set(pattern)
}
