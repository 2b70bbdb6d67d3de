package postgres

import "time"

// AdvMoreWait is the wait the store's next look after a short keyed claim
// would start from (claimMore.wait; 0 before any).
func AdvMoreWait(s *Store) time.Duration {
	s.more.mu.Lock()
	defer s.more.mu.Unlock()
	return s.more.wait
}
