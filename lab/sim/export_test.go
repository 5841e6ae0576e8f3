package sim

// RunMutant runs a schedule over a store with the deliberate bug mutant.
func RunMutant(seed uint64, f Features, mutant string) Result {
	return Run(Config{Seed: seed, Features: f, mutant: mutant})
}
