//! One declaration for a closed set of words: the Rust enum, its word on
//! disk and in views, and its proto enum on the wire.
//!
//! Before this, each such set was a `String` in the records and the proto,
//! and every enum that replaced one spelled `as_str`, `parse`, `wire` and
//! `from_wire` by hand: four tables per set that could drift apart. Here
//! each variant is written once, with its word and its wire variant, and
//! serde writes the word, so a file written when the field was a string
//! loads unchanged.

/// Declares a closed set:
///
/// ```ignore
/// closed_set! {
///     /// Doc.
///     pub enum ReviewState as clankie_proto::mailbox::v1::ReviewState {
///         /// Waiting for a verdict.
///         Pending = "pending" => Pending,
///         Approved = "approved" => Approved,
///     }
/// }
/// ```
///
/// The proto enum must have `Unspecified` at 0; `from_wire` reads it (and
/// any value this build does not know) as none.
#[macro_export]
macro_rules! closed_set {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident as $wire:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal => $wire_variant:ident ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: [$name; <[&str]>::len(&[$($word),+])] = [$($name::$variant),+];

            /// The words, in declaration order.
            pub const WORDS: &'static [&'static str] = &[$($word),+];

            /// The word on disk and in views.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word ),+
                }
            }

            /// The member a word names.
            pub fn parse(word: &str) -> Option<$name> {
                match word {
                    $( $word => Some($name::$variant), )+
                    _ => None,
                }
            }

            /// The member as its proto enum value.
            pub fn wire(self) -> i32 {
                type W = $wire;
                (match self {
                    $( $name::$variant => W::$wire_variant ),+
                }) as i32
            }

            /// The member a wire value names; unspecified or unknown is none.
            pub fn from_wire(value: i32) -> Option<$name> {
                type W = $wire;
                match W::try_from(value).ok()? {
                    $( W::$wire_variant => Some($name::$variant), )+
                    W::Unspecified => None,
                }
            }

            /// An optional member on the wire: none is unspecified.
            pub fn wire_or_unspecified(member: Option<$name>) -> i32 {
                member.map_or(0, $name::wire)
            }

            /// The word a view shows for a wire value: empty when unspecified.
            pub fn wire_word(value: i32) -> &'static str {
                $name::from_wire(value).map_or("", $name::as_str)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let word = <String as ::serde::Deserialize>::deserialize(d)?;
                $name::parse(&word)
                    .ok_or_else(|| <D::Error as ::serde::de::Error>::unknown_variant(&word, $name::WORDS))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::closed_set! {
        /// A set to test the macro with.
        enum Sample as clankie_proto::mailbox::v1::PeerOutcome {
            One = "one" => Confirmed,
            Two = "two-words" => Unconfirmed,
        }
    }

    #[test]
    fn each_member_keeps_its_word_on_disk_and_its_value_on_the_wire() {
        for m in Sample::ALL {
            assert_eq!(Sample::parse(m.as_str()), Some(m));
            assert_eq!(Sample::from_wire(m.wire()), Some(m));
            assert_eq!(Sample::wire_word(m.wire()), m.as_str());
            let json = serde_json::to_string(&m).expect("serialize");
            assert_eq!(json, format!("\"{}\"", m.as_str()));
            assert_eq!(serde_json::from_str::<Sample>(&json).expect("load"), m);
        }
        assert_eq!(Sample::from_wire(0), None);
        assert_eq!(Sample::from_wire(99), None);
        assert_eq!(Sample::wire_word(0), "");
        assert_eq!(Sample::wire_or_unspecified(None), 0);
        let err = serde_json::from_str::<Sample>("\"three\"").expect_err("unknown word");
        assert!(err.to_string().contains("one"), "{err}");
    }
}
