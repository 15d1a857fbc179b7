package netns

// For the tests of package netns_test (which reach root through internal/testenv).
var (
	NewPublicHostAt = newPublicHost
	SlotUsed        = slotUsed
	ErrTaken        = errTaken
)
