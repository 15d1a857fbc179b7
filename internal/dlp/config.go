package dlp

import (
	"fmt"
	"regexp"
	"strings"
)

// Action is what happens to a request in which a detector found something. Actions are ordered
// allow < log < redact < block; a verdict takes the strongest action of its findings.
type Action string

const (
	// ActionAllow lets the request pass and reports nothing; used to switch a detector or a
	// single secret rule off.
	ActionAllow Action = "allow"
	// ActionLog lets the request pass unchanged and reports the finding.
	ActionLog Action = "log"
	// ActionRedact lets the request pass with each match replaced by [REDACTED:<name>].
	ActionRedact Action = "redact"
	// ActionBlock stops the request; the verdict's Reason says why, for the agent to read.
	ActionBlock Action = "block"
)

func (a Action) rank() int {
	switch a {
	case ActionLog:
		return 1
	case ActionRedact:
		return 2
	case ActionBlock:
		return 3
	}
	return 0
}

func (a Action) valid() bool { return a == ActionAllow || a.rank() > 0 }

// OversizePolicy says what happens to a body the scanner cannot scan whole: one larger than
// Config.MaxBodyBytes (before or after decoding), one with a Content-Encoding it does not decode
// (br, zstd, ...), or one whose encoding is corrupt.
type OversizePolicy string

const (
	// OversizeBlock blocks such requests. The default: the safe choice for a DLP.
	OversizeBlock OversizePolicy = "block"
	// OversizeAllowUnscanned lets the body through unscanned (URL and headers are still scanned);
	// the verdict's Unscanned says so, for the log.
	OversizeAllowUnscanned OversizePolicy = "allow-unscanned"
	// OversizeScanPrefix scans the first MaxBodyBytes of the decoded body as text and streams the
	// rest unscanned. A finding whose action is redact blocks instead, because a body that was not
	// read whole cannot be rewritten.
	OversizeScanPrefix OversizePolicy = "scan-prefix"
)

// Built-in detector names, the keys of Config.Actions. A single secret rule can be given its own
// action with the key "secret:<gitleaks rule id>", e.g. "secret:generic-api-key".
const (
	DetectorPaymentCard = "payment-card"
	DetectorSecret      = "secret"
	DetectorPrivateKey  = "private-key"
	DetectorJWT         = "jwt"
	DetectorEmail       = "email"
	DetectorPhone       = "phone"
	DetectorIBAN        = "iban"
	DetectorUSSSN       = "us-ssn"
	// DetectorCryptoAddress finds Bitcoin addresses (rules bitcoin-p2pkh, bitcoin-p2sh,
	// bitcoin-bech32, bitcoin-taproot) and Ethereum addresses (rule ethereum). An address is
	// not a secret by itself: DefaultActions logs it.
	DetectorCryptoAddress = "crypto-address"
	// DetectorCryptoPrivateKey finds Bitcoin private keys in wallet import format (rule wif).
	DetectorCryptoPrivateKey = "crypto-private-key"
	// DetectorSeedPhrase finds BIP-39 mnemonic seed phrases (rule bip39): 12 to 24 words of the
	// English wordlist whose checksum holds.
	DetectorSeedPhrase = "seed-phrase"
	// DetectorCustom is the Finding.Detector of custom regex detectors; Finding.Rule is the
	// custom detector's name.
	DetectorCustom = "custom"
)

var builtinDetectors = []string{DetectorPaymentCard, DetectorSecret, DetectorPrivateKey, DetectorJWT,
	DetectorEmail, DetectorPhone, DetectorIBAN, DetectorUSSSN, DetectorCryptoAddress, DetectorCryptoPrivateKey,
	DetectorSeedPhrase}

// DefaultMaxBodyBytes is the default Config.MaxBodyBytes: 16 MiB, comfortably above the 10 MB
// bodies the throughput target is stated for, small enough that a scan takes well under a second.
const DefaultMaxBodyBytes = 16 << 20

// Config is a scanner's policy. The zero value is valid and means DefaultActions, no custom
// detectors, a 16 MiB body cap that blocks larger bodies, US as the phone region, and decoding
// of encoded content with the limits of DecodeConfig's defaults.
type Config struct {
	// Actions maps a detector name (DetectorPaymentCard, ...) or a single secret rule
	// ("secret:<id>") to its action. Detectors not listed are off. Nil means DefaultActions().
	Actions map[string]Action

	// Custom are extra regex detectors from policy.
	Custom []CustomDetector

	// MaxBodyBytes caps the body the scanner reads and decodes, in bytes, both the bytes on the
	// wire and the decoded bytes (a gzip bomb is oversize, not a memory problem). Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// Oversize is what happens to a body that cannot be scanned whole. Default OversizeBlock.
	Oversize OversizePolicy

	// PhoneRegion is the CLDR region (e.g. "US", "GB", "DE") whose national phone number forms
	// are recognised; numbers in international form (+CC...) are recognised for every region.
	// Default "US".
	PhoneRegion string

	// IgnoreHeaders lists header names (case-insensitive) that are not scanned, e.g. a header the
	// proxy itself adds. Default none: every header is scanned, Cookie and Authorization included.
	IgnoreHeaders []string

	// Concurrency is how many goroutines the scan of one large text (1 MiB and more) may use:
	// 1 scans sequentially, 2 (the default) runs the keyword pass and the digit and e-mail pass
	// at once, which nearly halves the latency of a large body on a machine with a core to spare.
	// More is no faster.
	Concurrency int

	// DisableSecretRules lists secret rule ids (gitleaks' or this package's egress rules) that
	// are not loaded at all (cheaper than mapping "secret:<id>" to allow, which still runs the
	// rule). Default none.
	DisableSecretRules []string

	// Decode sets how encoded content (base64, hex, percent-encoding, quoted-printable,
	// gzip/deflate, and chains of them) is decoded before matching. The zero value decodes, with
	// the default limits.
	Decode DecodeConfig
}

// DecodeConfig sets the decoding of encoded content inside what is scanned (decode.go). Every
// scanned text (the URL path, the host, each query value, header value and body text or field)
// is searched for substrings that look like an encoding: runs of base64 characters (standard or
// URL-safe, padded or not, wrapped in lines), hex (plain, or with ':', ' ', '-' or "\x"
// between bytes), percent-escapes, quoted-printable escapes. Each is decoded, and what decodes
// to text (or to gzip or zlib data, which is inflated) is scanned again with every detector, to
// MaxDepth layers. A finding in decoded data is reported at the encoded token, with the chain
// in its reason ("an AWS access key, base64 → hex, in the query parameter q"), and redacting it
// replaces the whole encoded token.
type DecodeConfig struct {
	// Off turns decoding off: only what HTTP itself encodes (Content-Encoding, the percent
	// encoding of URLs and forms, JSON string escapes, multipart) is undone.
	Off bool
	// MaxDepth is the most layers one chain undoes (percent-encoding applied three times and
	// then base64 is four). Default DefaultDecodeDepth (4).
	MaxDepth int
	// MaxBytes caps the text decoding may produce for one request, to be scanned again: every
	// layer of every candidate of every part, inflated gzip included. Base64, hex,
	// percent-encoding and quoted-printable only shrink what they decode, so ordinary requests
	// stay well under it; compressed data and long chains of text are what reach it. A request
	// that reaches it is treated like an oversize body (Config.Oversize; blocked by default).
	// Decoding that gives no text (a UUID, a hash, a base64 image: 7.5 MB for a 10 MB body)
	// is counted apart against the same figure; past it, the pieces of tokens ("/v1/keys/..."
	// piece by piece) are no longer tried, and the request is not cut. Default
	// DefaultDecodeBytes (32 MiB).
	MaxBytes int64
	// MinBase64 is the shortest run of base64 characters (padding not counted) that is decoded.
	// Default 16 (12 bytes: a US SSN in base64 is 16 characters).
	MinBase64 int
	// MinHex is the fewest hex digits (delimiters not counted) that are decoded. Default 16
	// (8 bytes).
	MinHex int
}

// Decoding defaults; see DecodeConfig.
const (
	DefaultDecodeDepth = 4
	DefaultDecodeBytes = 32 << 20
)

// CustomDetector is a regex detector from policy.
type CustomDetector struct {
	// Name appears in findings (Finding.Rule) and in the redaction token [REDACTED:<Name>].
	// Letters, digits, '-', '_' and '.' only.
	Name string
	// Pattern is a Go (RE2) regular expression. If it has a capture group named "secret", only
	// that group is redacted; otherwise the whole match is.
	Pattern string
	// Action for matches; required.
	Action Action
	// Keywords, if any, make the pattern run only near an occurrence of one of them (ASCII case
	// is ignored), as gitleaks rules do; a match must contain a keyword. Without keywords the
	// pattern runs over all scanned text, which costs throughput in proportion to its complexity.
	Keywords []string
	// Description is used in the verdict's reason ("a match of <Description>"). Default: the
	// custom detector "<Name>".
	Description string
}

// DefaultActions is the policy used when Config.Actions is nil. Credentials (secrets, private
// keys, JWTs, cryptocurrency private keys and seed phrases) and the identifiers whose leak does
// direct harm (payment cards, US SSNs) block: redacting a credential usually breaks the request
// anyway, and a block tells the agent clearly what happened. IBANs are redacted (they travel in
// legitimate invoices, but the origin rarely needs them). E-mail addresses, phone numbers and
// cryptocurrency addresses are only logged: they are in too much legitimate traffic (sign-ups,
// contact forms, commit metadata, block explorers, payment pages) to stop, and an address gives
// no one the funds it holds.
func DefaultActions() map[string]Action {
	return map[string]Action{
		DetectorPaymentCard:      ActionBlock,
		DetectorSecret:           ActionBlock,
		DetectorPrivateKey:       ActionBlock,
		DetectorJWT:              ActionBlock,
		DetectorUSSSN:            ActionBlock,
		DetectorCryptoPrivateKey: ActionBlock,
		DetectorSeedPhrase:       ActionBlock,
		DetectorIBAN:             ActionRedact,
		DetectorEmail:            ActionLog,
		DetectorPhone:            ActionLog,
		DetectorCryptoAddress:    ActionLog,
	}
}

var customNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// withDefaults returns a copy with defaults filled in, or the first configuration error.
func (c Config) withDefaults() (Config, error) {
	if c.Actions == nil {
		c.Actions = DefaultActions()
	}
	for k, a := range c.Actions {
		if !a.valid() {
			return c, fmt.Errorf("dlp: detector %q: unknown action %q", k, a)
		}
		name, rule, _ := strings.Cut(k, ":")
		known := false
		for _, d := range builtinDetectors {
			known = known || d == name
		}
		if !known || (rule != "" && name != DetectorSecret) {
			return c, fmt.Errorf("dlp: unknown detector %q", k)
		}
	}
	seen := map[string]bool{}
	for _, d := range c.Custom {
		if !customNameRE.MatchString(d.Name) {
			return c, fmt.Errorf("dlp: custom detector name %q: use letters, digits, '-', '_', '.'", d.Name)
		}
		if seen[d.Name] {
			return c, fmt.Errorf("dlp: custom detector %q defined twice", d.Name)
		}
		seen[d.Name] = true
		if d.Action.rank() == 0 {
			return c, fmt.Errorf("dlp: custom detector %q: action must be log, redact or block", d.Name)
		}
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBodyBytes < 0 {
		return c, fmt.Errorf("dlp: MaxBodyBytes %d is negative", c.MaxBodyBytes)
	}
	switch c.Oversize {
	case "":
		c.Oversize = OversizeBlock
	case OversizeBlock, OversizeAllowUnscanned, OversizeScanPrefix:
	default:
		return c, fmt.Errorf("dlp: unknown oversize policy %q", c.Oversize)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 2
	}
	if c.PhoneRegion == "" {
		c.PhoneRegion = "US"
	}
	c.PhoneRegion = strings.ToUpper(c.PhoneRegion)
	d := &c.Decode
	if d.MaxDepth < 0 || d.MaxBytes < 0 || d.MinBase64 < 0 || d.MinHex < 0 {
		return c, fmt.Errorf("dlp: Decode limits must not be negative")
	}
	if d.MaxDepth == 0 {
		d.MaxDepth = DefaultDecodeDepth
	}
	if d.MaxBytes == 0 {
		d.MaxBytes = DefaultDecodeBytes
	}
	if d.MinBase64 == 0 {
		d.MinBase64 = 16
	}
	d.MinBase64 = max(d.MinBase64, 8)
	if d.MinHex == 0 {
		d.MinHex = 16
	}
	d.MinHex = max(d.MinHex, 8)
	return c, nil
}

// action returns the configured action for a detector (and, for secrets, a rule).
func (c *Config) action(detector, rule string) Action {
	if detector == DetectorSecret && rule != "" {
		if a, ok := c.Actions[detector+":"+rule]; ok {
			return a
		}
	}
	if a, ok := c.Actions[detector]; ok {
		return a
	}
	return ActionAllow
}
