package reliability_test

const envCrashChild = "IDEM_RELIABILITY_CRASH_CHILD"

func crashChild() int { return 0 }
