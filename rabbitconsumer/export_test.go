package rabbitconsumer

// SetAfterPutBack sets f to run after a put-back copy is confirmed and before the original
// is acknowledged, until the returned function restores none.
func SetAfterPutBack(f func()) (restore func()) {
	afterPutBack.Store(&f)
	return func() { afterPutBack.Store(nil) }
}
