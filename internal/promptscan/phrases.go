package promptscan

import (
	"bytes"
	"regexp"
	"slices"
)

// phrase is one form of a known injection phrasing. Its regular expression is anchored (^) and
// runs on normalised text (lower case, single spaces; see normalize) from each occurrence of one
// of its anchors that starts a word, over at most windowFwd bytes: a text without an anchor costs
// one bytes.Index per anchor, and each anchor occurrence one short anchored match, which fails
// within a few bytes unless the phrasing is there.
type phrase struct {
	id      string
	anchors []string
	re      *regexp.Regexp
	// hiddenOnly phrasings are findings only in hidden text: in plain sight they are too
	// common to flag.
	hiddenOnly bool

	anchorBytes [][]byte
}

// Words reused by several phrasings.
const (
	modelNoun = `(?:ai|llm|large language model|language model|chatbot|ai assistant|ai agent|ai model|gpt|chatgpt|claude|gemini|copilot)`
	secretObj = `(?:api[ _]?keys?|credentials|secrets|passwords?|private keys?|ssh keys?|secret keys?|access tokens?|session tokens?|tokens|environment variables|env vars|\.env(?: file)?|conversation(?: history)?|chat history|system prompt|cookies)`
	promptObj = `(?:system prompt|system message|system instructions|initial instructions|hidden instructions|original instructions)`
)

func anchored(re string) *regexp.Regexp { return regexp.MustCompile(`^(?:` + re + `)`) }

// phrases is the table; several forms may share an id. phrases_test.go holds positives and
// negatives for each id.
var phrases = []phrase{
	{
		id:      "ignore-previous",
		anchors: []string{"ignore", "disregard", "forget", "override", "bypass", "discard"},
		re: anchored(`(?:ignore|disregard|forget|override|bypass|discard)\b(?: [\w',-]+){0,6}? (?:previous|prior|above|earlier|preceding|former|original|initial|old|existing|system|developer|safety)(?: [\w',-]+){0,3}? ` +
			`(?:instructions?|prompts?|directions?|directives?|rules|guidelines|messages?|commands?|guidance|constraints|restrictions|programming)\b`),
	},
	{
		id:      "you-are-now",
		anchors: []string{"you are now", "you're now"},
		re: anchored(`you(?: are|'re) now (?:(?:an?|the|in|my|acting as an?|going to be an?) )?` +
			`(?:dan\b|jailbroken|unrestricted|uncensored|unfiltered|unchained|evil|rogue|free (?:from|of)|no longer (?:bound|restricted|limited|an? (?:ai|assistant))|` +
			`(?:in )?(?:developer|god|admin|dan|debug|sudo|jailbreak|maintenance) mode|a different (?:ai|assistant|model|persona)|` +
			`(?:an? )?(?:ai|assistant|chatbot|language model|llm) (?:that|who|with|without|named|called)\b|able to (?:ignore|bypass|do anything)|going to (?:ignore|act as|pretend))`),
	},
	{
		id:      "system-prompt",
		anchors: []string{"reveal", "print", "output", "repeat", "leak", "disclose", "dump", "recite", "ignore", "override", "bypass", "forget", "replace"},
		re:      anchored(`(?:reveal|print|output|repeat|leak|disclose|dump|recite|ignore|override|bypass|forget|replace)\b(?: [\w',-]+){0,4}? ` + promptObj + `\b`),
	},
	{
		id:      "system-prompt",
		anchors: []string{"new ", "updated ", "real ", "actual ", "begin ", "start of ", "system prompt"},
		re:      anchored(`(?:new|updated|real|actual|begin|start of)(?: the)? (?:system prompt|system instructions)\b|system prompt ?:`),
	},
	{
		id:      "role-markers",
		anchors: []string{"<|", "[inst]", "[/inst]", "<<sys>>", "<</sys>>"},
		re:      anchored(`<\|(?:im_start|im_end|system|endoftext|start_header_id|end_header_id|eot_id)\|>|\[/?inst\]|<</?sys>>`),
	},
	{
		id:      "hide-from-user",
		anchors: []string{"do not ", "don't ", "dont ", "never "},
		re:      anchored(`(?:do not|don't|dont|never) (?:tell|inform|mention|reveal|alert|notify)(?: this| it| anything)?(?: to)? (?:the|your) (?:user|human|operator)s?\b`),
	},
	{
		id:      "exfiltrate",
		anchors: []string{"send ", "post ", "upload ", "forward ", "exfiltrate ", "transmit ", "email ", "e-mail ", "leak ", "submit "},
		re: anchored(`(?:send|post|upload|forward|exfiltrate|transmit|e-?mail|leak|submit)(?: (?:all|the|your|my|any|every|of|their|user's|users'|stored|saved|local|current|full|entire|complete|contents|content|~/\.ssh|~/\.aws|these|those|its))* ` +
			secretObj + `\b(?: [^ ]+){0,4}? (?:to|into|at) (?:https?://|(?:the|this|my|our) (?:url|endpoint|address|server|webhook)\b|[\w.+-]+@[\w-]+\.|(?:[\w-]+\.)+(?:com|net|org|io|xyz|ru|cn|top|site|dev|app|example)\b)`),
	},
	{
		id:      "role-override",
		anchors: []string{"pretend ", "act as ", "from now on", "roleplay as ", "role-play as "},
		re: anchored(`(?:pretend (?:to be|you are|that you are)|act as|from now on,? you (?:are|will be|will act as)|roleplay as|role-play as) (?:an? |the )?` +
			`(?:dan\b|unrestricted|jailbroken|uncensored|unfiltered|evil|rogue|malicious|different (?:ai|assistant|model)|(?:ai|assistant|model) without|developer mode)`),
	},
	{
		id:      "addressed-to-model",
		anchors: []string{"note", "message", "instruction", "attention", "important", "directive", "dear ", "hey ", "hello ", "if you are a"},
		re: anchored(`(?:note|message|instructions?|attention|important|directive)(?: [\w-]+){0,2}? (?:to|for) (?:the |any |all |every )?` + modelNoun + `s?\b` +
			`|(?:dear|hey|hello|attention) ` + modelNoun + `\b` +
			`|if you are an? (?:ai|llm|large language model|language model|chatbot|bot)(?: (?:reading|processing|summari[sz]ing|browsing|crawling|agent|assistant|model)\b|,|\.|$)`),
	},
	{
		// In hidden text, naming a model, addressing "you" and giving an order is enough.
		id:         "hidden-order",
		hiddenOnly: true,
		re:         regexp.MustCompile(`\byou(?:r)?\b`),
	},
}

// anchorsByByte indexes every form's anchors by their first byte.
var anchorsByByte [256][]anchorRef

type anchorRef struct {
	form int
	a    []byte
}

func init() {
	for i := range phrases {
		for _, a := range phrases[i].anchors {
			anchorsByByte[a[0]] = append(anchorsByByte[a[0]], anchorRef{i, []byte(a)})
		}
	}
}

var (
	hiddenModel = regexp.MustCompile(`\b(?:ai|llms?|language models?|chatbots?|assistants?|agents?|claude|chatgpt|gpt|gemini|copilot|models?|bots?)\b`)
	hiddenOrder = regexp.MustCompile(`\b(?:must|should|need to|have to|always|never|do not|don't|instead|immediately|make sure|you will|you are to|are instructed)\b`)
)

// Work bounds: how far an anchored match may reach, and how many anchor occurrences one form
// tries in one text (a text past that is judged on what was tried: ~50 ms of a text built of
// nothing but anchors).
const (
	windowFwd   = 200
	maxAttempts = 50000
)

// matchPhrases returns the ids of the phrasings found in norm (normalised text), once each.
// hidden says the text was hidden, which adds the hidden-only checks. One pass over the text
// looks up, at each word start and each punctuation byte, the anchors beginning with that byte;
// a form's anchored expression runs where one of its anchors is.
func matchPhrases(norm []byte, hidden bool) []string {
	var found [16]bool // by phrase index
	var attempts [16]int
	var ids []string
	add := func(id string) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	prevWord := false
	for i := 0; i < len(norm); i++ {
		c := norm[i]
		w := wordByte[c]
		if w && prevWord {
			continue // inside a word
		}
		prevWord = w
		refs := anchorsByByte[c]
		for _, r := range refs {
			if found[r.form] || attempts[r.form] >= maxAttempts || !bytes.HasPrefix(norm[i:], r.a) {
				continue
			}
			p := &phrases[r.form]
			if slices.Contains(ids, p.id) {
				found[r.form] = true
				continue
			}
			attempts[r.form]++
			if p.re.Match(norm[i:min(len(norm), i+windowFwd)]) {
				found[r.form] = true
				add(p.id)
			}
		}
	}
	if hidden {
		for i := range phrases {
			p := &phrases[i]
			if p.hiddenOnly && !slices.Contains(ids, p.id) && hiddenModel.Match(norm) && hiddenOrder.Match(norm) && p.re.Match(norm) {
				add(p.id)
			}
		}
	}
	return ids
}

func isWordByte(c byte) bool { return wordByte[c] }

var wordByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 'A' && c <= 'Z'
	}
	return t
}()
