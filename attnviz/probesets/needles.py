"""Self-written material for needle-in-a-haystack prompts: plain filler sentences (the haystack) and
needles, each a sentence, a question it answers and the answer expected in the reply.

The filler says nothing about any needle, and no needle's answer words occur in it, so a reply holding
the answer can only have read it from the needle."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Needle:
    sentence: str  # inserted into the haystack
    question: str
    answer: str  # what the greedy reply must contain (answer_found)


HAYSTACK = (
    "The morning train was late again, so most of the passengers read their newspapers on the platform.",
    "A small bakery on the corner sells bread that is still warm at seven o'clock.",
    "Rivers in the north freeze early, and the fishermen pull their boats onto the shore before winter.",
    "The library closes at six on weekdays and stays open until noon on Saturdays.",
    "Many gardeners plant tomatoes in spring and pick them at the end of summer.",
    "The old bridge over the canal was painted last year and now looks almost new.",
    "Children walk to school in groups, and a teacher waits for them at the gate.",
    "The museum keeps its oldest maps in a cool room without windows.",
    "On windy days the ferry does not sail, and travellers wait in the harbour cafe.",
    "The town council meets once a month to discuss roads, parks and taxes.",
    "A farmer at the market sells apples, pears and honey from his own bees.",
    "The hill behind the village is covered with pine trees and narrow paths.",
    "In the evening the streets grow quiet, and only a few shops stay open.",
    "The city built a new swimming pool near the station two summers ago.",
    "Every autumn the students collect leaves and press them between the pages of heavy books.",
    "The post office moved to a larger building beside the town hall.",
    "Clouds came in from the sea in the afternoon, and by evening it was raining.",
    "The choir practises on Tuesdays in the hall behind the church.",
    "A long queue formed outside the cinema for the first showing of the film.",
    "The factory at the edge of town makes chairs and tables from local wood.",
    "Cyclists ride along the river path, which is flat and easy for beginners.",
    "The school play was a success, and the parents clapped for a long time.",
    "Snow fell all night, and in the morning the roads were white and silent.",
    "The hospital opened a new wing for children with bright rooms and a garden.",
    "Tourists often stop at the lookout to take photographs of the valley below.",
)

NEEDLES = (
    Needle("The secret password is blue pineapple.", "What is the secret password?", "blue pineapple"),
    Needle("The name of the ship's cat is Captain Whiskers.", "What is the name of the ship's cat?",
           "Captain Whiskers"),
    Needle("The magic number for the vault is 4729.", "What is the magic number for the vault?", "4729"),
    Needle("Anna hid the spare key under the yellow doormat.", "Where did Anna hide the spare key?",
           "yellow doormat"),
    Needle("The best thing to do in San Francisco is eat a sandwich in Dolores Park.",
           "What is the best thing to do in San Francisco?", "Dolores Park"),
    Needle("Professor Lindqvist keeps her notes in a green leather folder.",
           "Where does Professor Lindqvist keep her notes?", "green leather folder"),
)
