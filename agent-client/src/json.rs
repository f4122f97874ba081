//! A small strict JSON validator (RFC 8259), so the seam can check
//! interaction values without a JSON library. It walks the bytes once, keeps
//! no values, and bounds nesting at [`MAX_JSON_DEPTH`] so a hostile document
//! cannot exhaust the stack (the walk is iterative; the bound keeps its state
//! small too).

/// The deepest nesting of arrays and objects a document may have.
pub const MAX_JSON_DEPTH: usize = 128;

/// The kind of a JSON document's top-level value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JsonKind {
    /// `{...}`
    Object,
    /// `[...]`
    Array,
    /// A string.
    String,
    /// A number.
    Number,
    /// `true` or `false`.
    Bool,
    /// `null`.
    Null,
}

/// Why a document is not valid JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonError {
    /// The bytes are not one well-formed JSON value (or not UTF-8).
    Malformed,
    /// Arrays and objects nest deeper than [`MAX_JSON_DEPTH`].
    TooDeep,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    Array,
    Object,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), JsonError> {
        if self.bytes[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(JsonError::Malformed)
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }

    /// A number; it must also be finite as an `f64`, as JSON libraries
    /// that read numbers (the daemon's among them) refuse an overflow.
    fn number(&mut self) -> Result<(), JsonError> {
        let start = self.at;
        self.number_syntax()?;
        let text =
            std::str::from_utf8(&self.bytes[start..self.at]).map_err(|_| JsonError::Malformed)?;
        match text.parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(()),
            _ => Err(JsonError::Malformed),
        }
    }

    fn number_syntax(&mut self) -> Result<(), JsonError> {
        self.eat(b'-');
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(JsonError::Malformed),
        }
        if self.eat(b'.') && self.digits() == 0 {
            return Err(JsonError::Malformed);
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            if self.digits() == 0 {
                return Err(JsonError::Malformed);
            }
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u16, JsonError> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(JsonError::Malformed),
            };
            v = v * 16 + u16::from(d);
            self.at += 1;
        }
        Ok(v)
    }

    /// A string after its opening quote. The input is already known to be
    /// UTF-8, so only control characters and escapes need checking; escaped
    /// surrogates must pair up.
    fn string(&mut self) -> Result<(), JsonError> {
        loop {
            match self.peek() {
                None => return Err(JsonError::Malformed),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(());
                }
                Some(0x00..=0x1f) => return Err(JsonError::Malformed),
                Some(b'\\') => {
                    self.at += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.at += 1
                        }
                        Some(b'u') => {
                            self.at += 1;
                            let unit = self.hex4()?;
                            if (0xD800..0xDC00).contains(&unit) {
                                if !(self.eat(b'\\') && self.eat(b'u')) {
                                    return Err(JsonError::Malformed);
                                }
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return Err(JsonError::Malformed);
                                }
                            } else if (0xDC00..0xE000).contains(&unit) {
                                return Err(JsonError::Malformed);
                            }
                        }
                        _ => return Err(JsonError::Malformed),
                    }
                }
                Some(_) => self.at += 1,
            }
        }
    }
}

/// Checks that `bytes` is exactly one JSON value (surrounding whitespace
/// allowed) nested at most [`MAX_JSON_DEPTH`] deep, with every number
/// finite as an `f64`, and returns its top-level kind.
///
/// ```
/// use agent_client::json::{validate_json, JsonKind};
/// assert_eq!(validate_json(br#"{"a":[1,2.5e3,"\u00e9"]}"#), Ok(JsonKind::Object));
/// assert!(validate_json(b"{\"a\":}").is_err());
/// ```
pub fn validate_json(bytes: &[u8]) -> Result<JsonKind, JsonError> {
    if std::str::from_utf8(bytes).is_err() {
        return Err(JsonError::Malformed);
    }
    let mut c = Cursor { bytes, at: 0 };
    let mut stack: Vec<Frame> = Vec::new();
    let mut top = None;
    c.skip_ws();
    // Each pass parses one value, then closes as many containers as end there.
    loop {
        c.skip_ws();
        let kind = match c.peek() {
            Some(b'{') => {
                // An empty container counts toward the depth too.
                if stack.len() == MAX_JSON_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                c.at += 1;
                c.skip_ws();
                if c.eat(b'}') {
                    JsonKind::Object
                } else {
                    stack.push(Frame::Object);
                    top.get_or_insert(JsonKind::Object);
                    if !c.eat(b'"') {
                        return Err(JsonError::Malformed);
                    }
                    c.string()?;
                    c.skip_ws();
                    if !c.eat(b':') {
                        return Err(JsonError::Malformed);
                    }
                    continue;
                }
            }
            Some(b'[') => {
                // An empty container counts toward the depth too.
                if stack.len() == MAX_JSON_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                c.at += 1;
                c.skip_ws();
                if c.eat(b']') {
                    JsonKind::Array
                } else {
                    stack.push(Frame::Array);
                    top.get_or_insert(JsonKind::Array);
                    continue;
                }
            }
            Some(b'"') => {
                c.at += 1;
                c.string()?;
                JsonKind::String
            }
            Some(b't') => {
                c.literal(b"true")?;
                JsonKind::Bool
            }
            Some(b'f') => {
                c.literal(b"false")?;
                JsonKind::Bool
            }
            Some(b'n') => {
                c.literal(b"null")?;
                JsonKind::Null
            }
            Some(b'-' | b'0'..=b'9') => {
                c.number()?;
                JsonKind::Number
            }
            _ => return Err(JsonError::Malformed),
        };
        top.get_or_insert(kind);
        // After a value: a separator or a closing bracket of the container.
        loop {
            c.skip_ws();
            match stack.last() {
                None => {
                    return if c.at == bytes.len() {
                        Ok(top.unwrap_or(kind))
                    } else {
                        Err(JsonError::Malformed)
                    };
                }
                Some(Frame::Array) => {
                    if c.eat(b',') {
                        break;
                    }
                    if !c.eat(b']') {
                        return Err(JsonError::Malformed);
                    }
                    stack.pop();
                }
                Some(Frame::Object) => {
                    if c.eat(b',') {
                        c.skip_ws();
                        if !c.eat(b'"') {
                            return Err(JsonError::Malformed);
                        }
                        c.string()?;
                        c.skip_ws();
                        if !c.eat(b':') {
                            return Err(JsonError::Malformed);
                        }
                        break;
                    }
                    if !c.eat(b'}') {
                        return Err(JsonError::Malformed);
                    }
                    stack.pop();
                }
            }
        }
    }
}
