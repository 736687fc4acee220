package stale

// MaxBytes returns the bound in force on the kept answers' memory, in
// bytes (New, SetMaxBytes); 0 when off, as for a nil Cache.
func (c *Cache) MaxBytes() int64 {
	if c == nil {
		return 0
	}
	return c.limit.Load()
}
