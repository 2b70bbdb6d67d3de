package storekit

// FlowSeed is a job an edge names, where a retention pass starts a walk
// of its flow: Ripe when it and its direct neighbours in the flow may go.
type FlowSeed struct {
	ID   int64
	Ripe bool
}

// PruneFlowSeeds walks the flow of each ripe seed not walked already in
// this pass, through prune, which deletes the flow of job id if all of it
// may go and returns the flow's job ids and how many it deleted. It
// returns how many jobs were deleted and the cursor of the next pass: the
// last seed's id when limit seeds were listed (more may follow), else 0.
// Both stores' PruneFlows use it.
func PruneFlowSeeds(seeds []FlowSeed, limit int, prune func(id int64) ([]int64, int, error)) (int, int64, error) {
	deleted, walked := 0, map[int64]bool{}
	for _, sd := range seeds {
		if !sd.Ripe || walked[sd.ID] {
			continue
		}
		ids, n, err := prune(sd.ID)
		if err != nil {
			return deleted, 0, err
		}
		deleted += n
		for _, id := range ids {
			walked[id] = true
		}
	}
	if len(seeds) < limit {
		return deleted, 0, nil
	}
	return deleted, seeds[len(seeds)-1].ID, nil
}
