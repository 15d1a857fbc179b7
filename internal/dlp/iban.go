package dlp

// IBANs: a country code from the IBAN registry, two check digits and the country's BBAN, with the
// total length the registry gives for the country, written contiguously or in the print form
// (groups of four separated by one space), in capitals. The mod-97 check (ISO 7064) must give 1.
// The character after the IBAN must not continue a word.

// ibanLengths is the IBAN length per country (SWIFT IBAN registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
	"BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
	"EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
	"GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
	"LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
	"NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
	"RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
	"SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

// iban checks for an IBAN starting at p, where text[p:p+2] are capitals followed by a digit run
// of at least two.
func (s *Scanner) iban(text []byte, p int) (match, bool) {
	want, ok := ibanLengths[string(text[p:p+2])]
	if !ok {
		return match{}, false
	}
	var buf [34]byte
	n := copy(buf[:], text[p:p+4])
	q := p + 4
	spaced := q < len(text) && text[q] == ' '
	for n < want {
		if spaced && n%4 == 0 {
			if q >= len(text) || text[q] != ' ' {
				return match{}, false
			}
			q++
		}
		if q >= len(text) || byteClass[text[q]]&(clsDigit|clsUpper) == 0 {
			return match{}, false
		}
		buf[n] = text[q]
		n++
		q++
	}
	if q < len(text) && isWord(text[q]) {
		return match{}, false
	}
	if !ibanMod97(buf[:n]) {
		return match{}, false
	}
	return match{detector: DetectorIBAN, desc: "an IBAN (" + string(text[p:p+2]) + ")", start: p, end: q,
		action: s.cfg.action(DetectorIBAN, "")}, true
}

func ibanMod97(iban []byte) bool {
	r := 0
	for i := range iban {
		c := iban[(i+4)%len(iban)] // the first four characters move to the end
		switch {
		case '0' <= c && c <= '9':
			r = (r*10 + int(c-'0')) % 97
		case 'A' <= c && c <= 'Z':
			r = (r*100 + int(c-'A') + 10) % 97
		default:
			return false
		}
	}
	return r == 1
}
