package audit

import "slices"

// A watch collects the sequence numbers of the records written for one session between its start
// and its stop: the Audited decorator watches a session while one of its steps runs, so that the
// step names its records (its run's, the egress of the run) by id rather than by a time window.
type watch struct{ seqs []int64 }

// maxWatched bounds the ids one watch keeps (a run making thousands of requests out).
const maxWatched = 1000

// WatchSession starts collecting the sequence numbers of the records written for session; stop
// ends it and returns them, in the order they were written (sandbox.AuditWatcher). Neither waits
// for a record being written (Log.wmu): a session's run starts with a watch, and under load the
// thread writing another session's record can wait for a CPU while holding the log's lock.
func (l *Log) WatchSession(session string) (stop func() []int64) {
	w := &watch{}
	l.wmu.Lock()
	if l.watches == nil {
		l.watches = map[string][]*watch{}
	}
	l.watches[session] = append(l.watches[session], w)
	l.wmu.Unlock()
	return func() []int64 {
		l.wmu.Lock()
		defer l.wmu.Unlock()
		ws := slices.DeleteFunc(l.watches[session], func(x *watch) bool { return x == w })
		if len(ws) == 0 {
			delete(l.watches, session)
		} else {
			l.watches[session] = ws
		}
		return w.seqs
	}
}
