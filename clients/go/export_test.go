package chronoq

// Internals the tests (package chronoq_test) check against encoding/json.
var (
	DecodeClaimFast = decodeClaimFast
	ParseTimeFast   = parseTimeFast
	AppendString    = appendString
	WorkerName      = workerName
)
