package rabbitconsumer

// SetOnHold sets f to run each time a batch's deliveries are held, before they wait to run
// again, until the returned function restores none.
func SetOnHold(f func()) (restore func()) {
	onHold.Store(&f)
	return func() { onHold.Store(nil) }
}
