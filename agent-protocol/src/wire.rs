//! A small Protobuf wire-format walker. prost drops unknown fields while
//! decoding, so the rules that depend on them (a reserved field sent by an
//! old client, unknown fields outside a MAC) read the raw bytes instead.

/// The raw bytes are not well-formed Protobuf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// One top-level field: its number, wire type and raw value bytes (for
/// length-delimited fields the payload without its length prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    /// Field number (1 ..= 2^29 - 1).
    pub number: u32,
    /// Wire type (0 varint, 1 fixed64, 2 length-delimited, 3 group, 5 fixed32).
    pub wire_type: u8,
    /// The value's bytes.
    pub value: &'a [u8],
}

const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;
/// Nesting bound for groups, as protobuf implementations use.
const MAX_GROUP_DEPTH: usize = 100;

fn read_varint(buf: &mut &[u8]) -> Result<u64, Malformed> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&byte, rest) = buf.split_first().ok_or(Malformed)?;
        *buf = rest;
        if i == 9 && byte > 1 {
            return Err(Malformed);
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(Malformed)
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], Malformed> {
    if buf.len() < n {
        return Err(Malformed);
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

fn read_key(buf: &mut &[u8]) -> Result<(u32, u8), Malformed> {
    let key = read_varint(buf)?;
    let number = key >> 3;
    if number == 0 || number > MAX_FIELD_NUMBER {
        return Err(Malformed);
    }
    Ok((number as u32, (key & 7) as u8))
}

fn skip_value<'a>(
    buf: &mut &'a [u8],
    number: u32,
    wire_type: u8,
    depth: usize,
) -> Result<&'a [u8], Malformed> {
    let start = *buf;
    match wire_type {
        0 => {
            read_varint(buf)?;
        }
        1 => {
            take(buf, 8)?;
        }
        2 => {
            let len = usize::try_from(read_varint(buf)?).map_err(|_| Malformed)?;
            return take(buf, len);
        }
        3 => {
            if depth >= MAX_GROUP_DEPTH {
                return Err(Malformed);
            }
            loop {
                let (inner, inner_type) = read_key(buf)?;
                if inner_type == 4 {
                    if inner != number {
                        return Err(Malformed);
                    }
                    break;
                }
                skip_value(buf, inner, inner_type, depth + 1)?;
            }
        }
        5 => {
            take(buf, 4)?;
        }
        _ => return Err(Malformed),
    }
    Ok(&start[..start.len() - buf.len()])
}

/// Every top-level field of `bytes`, in order; `Malformed` if any key,
/// length or group is broken.
pub fn fields(mut bytes: &[u8]) -> Result<Vec<Field<'_>>, Malformed> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (number, wire_type) = read_key(&mut bytes)?;
        let value = skip_value(&mut bytes, number, wire_type, 0)?;
        out.push(Field {
            number,
            wire_type,
            value,
        });
    }
    Ok(out)
}

/// The top-level field numbers of `bytes` that are not in `known`, in order
/// of appearance (repeats included).
pub fn unknown_field_numbers(bytes: &[u8], known: &[u32]) -> Result<Vec<u32>, Malformed> {
    Ok(fields(bytes)?
        .into_iter()
        .map(|f| f.number)
        .filter(|n| !known.contains(n))
        .collect())
}

/// Whether `bytes` has a top-level field `number`.
pub fn has_field(bytes: &[u8], number: u32) -> Result<bool, Malformed> {
    Ok(fields(bytes)?.iter().any(|f| f.number == number))
}
