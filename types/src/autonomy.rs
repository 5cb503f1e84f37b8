//! The owner's saved global autonomy level (`captain/autonomy.json`, where
//! it is the word it always was).

crate::closed_set! {
    /// How far an autonomous turn may go when the master switch is on;
    /// off until the owner saves another.
    #[derive(Default)]
    pub enum AutonomyLevel as clankie_proto::auto::v1::AutonomyLevel {
        /// Autonomous turns do nothing.
        #[default]
        Off = "off" => Off,
        /// Autonomous turns may only propose.
        Propose = "propose" => Propose,
        /// Autonomous turns may staff and work projects on Auto.
        Full = "full" => Full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_on_disk_are_the_strings_they_were() {
        assert_eq!(AutonomyLevel::WORDS, ["off", "propose", "full"]);
    }
}
