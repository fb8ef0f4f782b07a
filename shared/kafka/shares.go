package kafka

// shares counts what tenants hold of a table (consumer groups, their
// members): at most max in all, and at most per of one tenant, so that
// one tenant cannot fill the table for the others (as the held budget's
// half). Its caller holds the coordinator's lock.
type shares struct {
	max, per int
	total    int
	by       map[string]int
}

// newShares bounds a table to max entries, one tenant's to per and at
// most half of max.
func newShares(max, per int) *shares {
	return &shares{max: max, per: min(per, (max+1)/2), by: map[string]int{}}
}

// take counts one more entry of tenant; false: the table or the tenant's
// share is full, and nothing is counted.
func (s *shares) take(tenant string) bool {
	if s.total >= s.max || s.by[tenant] >= s.per {
		return false
	}
	s.total++
	s.by[tenant]++
	return true
}

// put gives back an entry tenant took.
func (s *shares) put(tenant string) {
	s.total--
	if s.by[tenant]--; s.by[tenant] <= 0 {
		delete(s.by, tenant)
	}
}

// shortTenant is a tenant's id as logs show it: its first 8 characters.
func shortTenant(t string) string {
	if len(t) > 8 {
		return t[:8] + "..."
	}
	return t
}
