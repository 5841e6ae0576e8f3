// Command idemsim runs the deterministic simulation of lab/sim: for a while over
// fresh seeds, or one seed verbosely. `make sim` runs it.
//
//	idemsim -time 60s                 schedules for a minute, from a seed drawn from the clock
//	idemsim -seed 1234                replay one schedule and print its whole trace
//	idemsim -features all,-crash      only schedules without crashes
//
// It prints every failing seed on one line, the first schedule of each violation class in
// full, and ends with one line: "N schedules, M violations". With -fail it exits 1 if any
// schedule broke an invariant.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem/lab/sim"
)

func main() {
	seed := flag.Uint64("seed", 0, "replay this one seed verbosely")
	start := flag.Uint64("start", 0, "the first seed of a timed run (default: drawn from the clock)")
	d := flag.Duration("time", time.Minute, "how long a timed run lasts")
	feats := flag.String("features", "all", "the features schedules may use, e.g. all,-crash or sqs,kill,late")
	fail := flag.Bool("fail", false, "exit 1 if a schedule broke an invariant")
	attachPanics := flag.Bool("attachpanic", false, "attached writes whose condition would fail panic instead (sim.Config.AttachPanics)")
	twice := flag.Bool("twice", false, "run every seed twice and count the seeds whose traces or violations differ (the determinism check)")
	flag.Parse()
	f, err := sim.ParseFeatures(*feats)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer sim.Prepare()()
	if *seed != 0 {
		r := sim.Run(sim.Config{Seed: *seed, Features: f, AttachPanics: *attachPanics})
		fmt.Print(r.Report(0))
		fmt.Printf("%d steps; stats %+v\n", r.Steps, r.Stats)
		fmt.Printf("1 schedules, %d violations\n", len(r.Violations))
		if *fail && r.Failed() {
			os.Exit(1)
		}
		return
	}
	if *start == 0 {
		*start = uint64(time.Now().UnixNano()) % 1e12
	}
	fmt.Printf("seeds from %d, features %s, for %s\n", *start, f, *d)
	var (
		n, violations, failed int
		differ                int
		streams               int // schedules with a stream
		first                 = map[string]uint64{}
		count                 = map[string]int{}
		total                 sim.Stats
	)
	began := time.Now()
	for s := *start; time.Since(began) < *d; s++ {
		r := sim.Run(sim.Config{Seed: s, Features: f, AttachPanics: *attachPanics})
		n++
		if *twice {
			if again := sim.Run(sim.Config{Seed: s, Features: f, AttachPanics: *attachPanics}); again.TraceHash() != r.TraceHash() {
				differ++
				fmt.Printf("seed %d: two runs differ\n", s)
			}
		}
		total.Runs += r.Stats.Runs
		total.Effects += r.Stats.Effects
		total.Reruns += r.Stats.Reruns
		total.OverlapBeyondSkew += r.Stats.OverlapBeyondSkew
		total.LostBeyondSkew += r.Stats.LostBeyondSkew
		total.Outlived += r.Stats.Outlived
		total.Unguarded += r.Stats.Unguarded
		total.Orphans += r.Stats.Orphans
		total.Collisions += r.Stats.Collisions
		total.StreamInvocations += r.Stats.StreamInvocations
		total.StreamWaits += r.Stats.StreamWaits
		total.StreamPolls += r.Stats.StreamPolls
		total.StreamTakeovers += r.Stats.StreamTakeovers
		total.AttachPanics += r.Stats.AttachPanics
		if r.Stats.StreamInvocations > 0 {
			streams++
		}
		if !r.Failed() {
			continue
		}
		failed++
		violations += len(r.Violations)
		var classes []string
		for _, v := range r.Violations {
			if _, ok := first[v.Invariant]; !ok {
				first[v.Invariant] = s
				fmt.Printf("first %s after %d schedules:\n%s", v.Invariant, n, r.Report(60))
			}
			count[v.Invariant]++
			if !slices.Contains(classes, v.Invariant) {
				classes = append(classes, v.Invariant)
			}
		}
		fmt.Printf("seed %d: %s\n", s, strings.Join(classes, " "))
	}
	elapsed := time.Since(began)
	fmt.Printf("%.0f schedules/s; %d schedules failed; %d with a stream; stats %+v\n", float64(n)/elapsed.Seconds(), failed, streams, total)
	if *twice {
		fmt.Printf("determinism: %d of %d seeds ran differently twice\n", differ, n)
	}
	classes := make([]string, 0, len(count))
	for c := range count {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	for _, c := range classes {
		fmt.Printf("  %-34s %6d  first seed %d (schedule %d)\n", c, count[c], first[c], first[c]-*start+1)
	}
	fmt.Printf("%d schedules, %d violations\n", n, violations)
	if *fail && violations > 0 {
		os.Exit(1)
	}
}
