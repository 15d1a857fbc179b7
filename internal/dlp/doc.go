// Package dlp finds secrets and personal data in what a sandbox sends out, so the egress proxy
// can block a request, send it on with the matches redacted, or log it.
//
// # Use
//
// Build one Scanner per policy with New(Config) (loading gitleaks' rules takes ~100 ms the first
// time) and share it; it is safe for concurrent use. For each outgoing request the proxy calls
//
//	v, err := scanner.ScanRequest(r)
//
// and then: on ActionBlock, answers 403 with v.Reason, which is written for the agent to read
// ("blocked: a payment card number (Visa) in the JSON body field $.payment.card"); on
// ActionRedact, forwards r, which ScanRequest has already rewritten; on ActionLog and
// ActionAllow, forwards r unchanged. v.Findings (never holding the matched text) and
// v.Unscanned go to the log either way. err is non-nil only when the client's body could not be
// read. Other callers (MCP tool calls) use ScanContent for a body of a known Content-Type or
// ScanBytes for plain text. MeasureThroughput is the figure behind `agentbox bench egress`.
//
// # What is scanned
//
// The URL path (percent-decoded), host and user info, every query parameter and header (as
// "name=value" and "Name: value", decoded, so rules that need the name see it), and the body,
// after undoing its Content-Encoding (gzip, deflate; a chain of them), by Content-Type: JSON as
// one text with string escapes decoded (a \u0041 cannot hide an AKIA, a card sent as a JSON
// number is found, and findings carry a JSON path), x-www-form-urlencoded field by field,
// multipart/form-data part by part with file names, and anything else (text/*, unknown, binary)
// as raw bytes. Base64 or other encodings inside content are not undone: the scanner decodes
// what HTTP encodes, not what an agent might encode on purpose, which no DLP can follow.
//
// A body larger than MaxBodyBytes (16 MiB by default, on the wire and decoded), or with a
// Content-Encoding it does not decode (br, zstd), or corrupt, falls under Config.Oversize:
// block (the default), allow-unscanned, or scan-prefix (the first MaxBodyBytes, as text; a
// redact finding there blocks, since a body not read whole cannot be rewritten). The body is
// never held beyond MaxBodyBytes: the rest streams on unread.
//
// # Detectors
//
// Each detector and each secret rule has an action (DefaultActions: credentials, cards and SSNs
// block, IBANs are redacted, e-mail addresses and phone numbers are logged); a request's verdict
// is the strongest action among its findings. The detectors, with their rules in their files:
//
//   - payment-card (card.go): 13-19 digits, bare or in printed groups with one consistent space
//     or dash, Luhn, IIN ranges and lengths of Visa, Mastercard (2-series too), Amex, Discover,
//     JCB, Diners, UnionPay, Maestro. Digit runs inside longer runs, glued to letters, or part of
//     a decimal number do not match.
//   - secret (secrets.go, regexrules.go): gitleaks' default rules, ~215 of them, with their
//     keywords, entropy thresholds and allowlists; "secret:<rule id>" sets one rule's action.
//   - private-key (privatekey.go): PEM and OpenSSH/PGP private key blocks.
//   - jwt (jwt.go): JWS and JWE whose header decodes to JSON with "alg".
//   - email (email.go): dot-atom addresses whose domain ends in an ICANN public suffix.
//   - phone (phone.go): validated with libphonenumber's Go port, international form and the
//     national forms of Config.PhoneRegion (US by default), digit grouping checked.
//   - iban (iban.go): registry length per country and mod 97.
//   - us-ssn (ssn.go): AAA-GG-SSSS under the SSA's rules; nine bare digits only next to "SSN".
//   - custom (config.go): regexes from policy, optionally keyword-gated like gitleaks rules.
//
// Forms that are common in ordinary data (nine bare digits, a phone number without separators)
// match only with a context word in the 32 bytes before them: a DLP that blocks order numbers
// gets switched off.
//
// # Redaction
//
// A redacted match is replaced by [REDACTED:<name>] (the rule id for secrets and custom
// detectors, the detector name otherwise), in the decoded text, then re-encoded for where it
// came from: escaped into its JSON string (a JSON number becomes a string), percent-encoded into
// its form field, query parameter or path, written back into its multipart part, and the body
// compressed again with its Content-Encoding, with ContentLength and Content-Length set. A token
// rather than a same-length mask: it tells the origin and the agent what was removed and cannot
// be taken for data. Matches in the host, the user info or a header name cannot be rewritten;
// a redact action there blocks.
//
// # Speed
//
// The target is over 200 MB/s on a 10 MB JSON body on a 2-core machine. Running gitleaks'
// detector on such a body gave 0.1 MB/s, and running its generic-api-key regex alone over the
// body takes ~4 s, so nothing here runs a regex over a whole body. Instead a text gets two
// passes (concurrently when it is 1 MiB or more and Config.Concurrency allows):
//
//   - one Aho-Corasick automaton over the keywords of all rules, plus "eyJ" and "-----BEGIN ",
//     run as two interleaved halves so one core does two table walks at once; each rule's regex
//     then runs only in a window around its keyword hits, sized from the regex's longest match.
//     Rules whose keywords are everyday words (generic-api-key, vault-service-token with "s.",
//     twilio with "sk") or look like hex ("a3-", "4b1d", "eaaa") first pass a hand-written
//     necessary condition (TestGates checks them against the regexes).
//   - one scan for digits (eight bytes at a time) that groups digit runs with their separators
//     into clusters, rejects the ones glued to identifiers, and hands the rest to the card, SSN
//     and phone checks; IBAN checks start where a digit run follows two capitals; e-mail checks
//     start at each '@' (found with bytes.IndexByte).
//
// JSON bodies without backslashes are scanned in place; the view of one with escapes is a pooled
// buffer. A text built to be slow (a megabyte of "api_key=<random>" lines or of phone numbers)
// hits a work limit (1000 findings, regex window bytes, phone parses; scanner.go) and is treated
// like an oversize body, so no request holds the scanner for more than a fraction of a second. Paths are computed only when there are findings, by a walk that stops after the last.
// BenchmarkScanRequestJSON10MB and MeasureThroughput measure the whole of ScanRequest on
// BenchBody, a generated chat-completion body with product records, log lines, prose and a few
// secrets every ~100 KB; docs/RATIONALE.md has the figures.
package dlp
