//! A small YAML document tree that remembers the line of every key and value,
//! built from `saphyr-parser`'s event stream (a maintained YAML 1.2 parser
//! whose events carry source spans; the successor of `yaml-rust`).
//!
//! Scalars are kept as their text: pipeline options are typed by the option
//! they set, not by YAML's implicit typing (`port: 3306` and `port: "3306"`
//! mean the same; `password: 0123` stays `0123`).

use saphyr_parser::{Event, Parser, Span};

/// Deepest nesting accepted; a pipeline definition needs three levels
/// (`route` → list → mapping). Protects the recursive builder's stack.
pub const NESTING_MAX: usize = 16;

/// A YAML node with the (1-based) line it starts on.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// A scalar's text (a YAML `null`/`~`/empty value is `Scalar("")` with `null: true`).
    Scalar {
        /// The text.
        value: String,
        /// Whether it was a plain `null`, `~` or empty scalar.
        null: bool,
        /// Line of the value.
        line: usize,
    },
    /// A mapping in document order; keys are scalars.
    Map {
        /// `(key, key line, value)`.
        entries: Vec<(String, usize, Node)>,
        /// Line of the mapping.
        line: usize,
    },
    /// A sequence.
    Seq {
        /// Items.
        items: Vec<Node>,
        /// Line of the sequence.
        line: usize,
    },
}

impl Node {
    /// The line the node starts on.
    pub fn line(&self) -> usize {
        match self {
            Node::Scalar { line, .. } | Node::Map { line, .. } | Node::Seq { line, .. } => *line,
        }
    }

    /// A short name of the node's kind for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Scalar { .. } => "a scalar",
            Node::Map { .. } => "a mapping",
            Node::Seq { .. } => "a list",
        }
    }
}

/// A document could not be read as a pipeline definition tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct YamlError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
}

fn line_of(span: &Span) -> usize {
    span.start.line()
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), YamlError> {
        match self.parser.next() {
            Some(Ok(event)) => Ok(event),
            Some(Err(e)) => Err(YamlError {
                line: e.marker().line(),
                message: format!("YAML syntax error: {}", e.info()),
            }),
            None => Err(YamlError {
                line: 0,
                message: "unexpected end of YAML input".to_string(),
            }),
        }
    }

    fn node(&mut self, event: Event<'a>, span: Span, depth: usize) -> Result<Node, YamlError> {
        let line = line_of(&span);
        if depth > NESTING_MAX {
            return Err(YamlError {
                line,
                message: format!("nesting deeper than {NESTING_MAX} levels"),
            });
        }
        match event {
            Event::Scalar(text, style, anchor, _tag) => {
                if anchor != 0 {
                    return Err(anchors_unsupported(line));
                }
                let null = style == saphyr_parser::ScalarStyle::Plain
                    && matches!(&*text, "" | "~" | "null" | "Null" | "NULL");
                Ok(Node::Scalar {
                    value: text.into_owned(),
                    null,
                    line,
                })
            }
            Event::MappingStart(anchor, _) => {
                if anchor != 0 {
                    return Err(anchors_unsupported(line));
                }
                let mut entries: Vec<(String, usize, Node)> = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    let key_line = line_of(&span);
                    let key = match event {
                        Event::MappingEnd => break,
                        Event::Scalar(text, ..) => text.into_owned(),
                        _ => {
                            return Err(YamlError {
                                line: key_line,
                                message: "mapping keys must be plain names".to_string(),
                            })
                        }
                    };
                    if let Some((_, first, _)) = entries.iter().find(|(k, ..)| *k == key) {
                        return Err(YamlError {
                            line: key_line,
                            message: format!("duplicate key `{key}` (first set on line {first})"),
                        });
                    }
                    let (event, span) = self.next()?;
                    let value = self.node(event, span, depth + 1)?;
                    entries.push((key, key_line, value));
                }
                Ok(Node::Map { entries, line })
            }
            Event::SequenceStart(anchor, _) => {
                if anchor != 0 {
                    return Err(anchors_unsupported(line));
                }
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(event, span, depth + 1)?);
                }
                Ok(Node::Seq { items, line })
            }
            Event::Alias(_) => Err(anchors_unsupported(line)),
            _ => Err(YamlError {
                line,
                message: "unexpected YAML structure".to_string(),
            }),
        }
    }
}

fn anchors_unsupported(line: usize) -> YamlError {
    YamlError {
        line,
        message: "YAML anchors and aliases are not supported in pipeline definitions".to_string(),
    }
}

/// Parses exactly one YAML document. An empty input is an empty mapping.
pub fn parse(text: &str) -> Result<Node, YamlError> {
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
    };
    let mut root = None;
    loop {
        let (event, span) = builder.next()?;
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => break,
            Event::DocumentStart(_) => {
                if root.is_some() {
                    return Err(YamlError {
                        line: line_of(&span),
                        message:
                            "more than one YAML document; a pipeline definition is one document"
                                .to_string(),
                    });
                }
                let (event, span) = builder.next()?;
                if matches!(event, Event::DocumentEnd) {
                    root = Some(Node::Map {
                        entries: Vec::new(),
                        line: line_of(&span),
                    });
                } else {
                    root = Some(builder.node(event, span, 0)?);
                }
            }
            _ => {
                return Err(YamlError {
                    line: line_of(&span),
                    message: "unexpected YAML structure".to_string(),
                })
            }
        }
    }
    Ok(root.unwrap_or(Node::Map {
        entries: Vec::new(),
        line: 1,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_carry_their_lines() {
        let node =
            parse("source:\n  type: mysql\n  port: 3306\nroute:\n  - source-table: a.b\n").unwrap();
        let Node::Map { entries, .. } = node else {
            panic!("not a map")
        };
        assert_eq!(entries[0].0, "source");
        assert_eq!(entries[0].1, 1);
        let Node::Map {
            entries: source, ..
        } = &entries[0].2
        else {
            panic!("not a map")
        };
        assert_eq!(source[1].0, "port");
        assert_eq!(source[1].1, 3);
        assert!(matches!(&source[1].2, Node::Scalar { value, line: 3, .. } if value == "3306"));
        let Node::Seq { items, .. } = &entries[1].2 else {
            panic!("not a list")
        };
        assert_eq!(items[0].line(), 5);
    }

    #[test]
    fn duplicate_key_names_both_lines() {
        let err = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.message.contains("line 1"), "{err}");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let err = parse("source:\n  type: [mysql\n").unwrap_err();
        assert!(err.line >= 2, "{err}");
    }

    #[test]
    fn aliases_are_refused() {
        assert!(parse("a: &x 1\nb: *x\n").is_err());
    }
}
