"""The participant's page's own words: labels, buttons, timers, messages. One place of
defaults, each overridden per key by a protocol's ``[texts]`` table (docs/protocol.md),
so a study can be run in another language.

``{name}`` in a text is filled in by the page (a number, a cookie's name, a robot's
name); an override may use the placeholders of its default and no others.

A text that shows a number with a word has a singular, the sibling key ``<key>_one``:
the page shows it when the number is 1 ("1 person", "2 people"). The singular may use its
plural's placeholders, or leave the number out ("One question ..."); a protocol
overrides both or neither, so a translated study never shows one of them in English.
"""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
SINGULAR = "_one"

DEFAULT_TEXTS: dict[str, str] = {
    "language": "en",
    # the page's frame
    "progress_label": "progress",
    "loading": "Warming up the ovens…",
    "offline": "Reconnecting to the bakery…",
    # buttons and links
    "agree": "I agree to take part",
    "decline": "I do not agree",
    "continue": "Continue",
    "start_session": "Start the session",
    "submit": "Submit",
    "keep_data": "Yes, you may use my data",
    "delete_data": "No, delete my data",
    "complete": "Complete the study on the platform",
    "stay": "Stay on this page",
    "taking_you_back": "Taking you back in {seconds} s.",
    "return": "Return to the study platform",
    "completion_code": "Your completion code: {code}",
    # themes, teammate, robots
    "squares": "squares",
    "letters": "letters",
    "theme_cookie": "Decorated on the {cookie} cookies",
    "teammate_hello": "Your teammate is a computer agent that decorates at the pace of a "
                      "person. You will see its station working live beside yours.",
    "robot_name": "Robot {robot}",
    # real teams: the waiting room, the stations, a seat given to an agent
    # {waiting}: the people here who can be in one team with you (you included)
    "lobby_waiting": "{waiting} of the {needed} people of your team are here",
    "lobby_waiting_one": "{waiting} of the {needed} people of your team is here: you",
    # teams formed by traits: the others waiting, whom the study's team type cannot pair
    # with you
    "lobby_others": "{others} other people are waiting, but their practice and ratings do "
                    "not fit with yours in the team this study forms.",
    "lobby_others_one": "{others} other person is waiting, but their practice and ratings "
                        "do not fit with yours in the team this study forms.",
    "lobby_missing": "Waiting for {missing} more people.",
    "lobby_missing_one": "Waiting for {missing} more person.",
    "lobby_missing_traits": "Waiting for {missing} more people whose practice and ratings "
                            "fit with yours.",
    "lobby_missing_traits_one": "Waiting for {missing} more person whose practice and "
                                "ratings fit with yours.",
    "lobby_countdown": "The wait ends within {seconds} s",
    "lobby_leave": "Leave the waiting room",
    "lobby_timeout_agents": "If your team is not complete by then, agents will fill the "
                            "empty seats.",
    "lobby_timeout_unmatched": "If your team is not complete by then, you will be sent back "
                               "with your completion link.",
    # the team page's seats, and a round's other stations
    "team_seats": "Who is in your team",
    "team_you": "You",
    "station_person": "Teammate {seat}",
    "station_agent": "Agent {seat}",
    "station_taken_over": "Teammate {seat} (now played by an agent)",
    "team_waiting": "Waiting for {count} teammates to be ready…",
    "team_waiting_one": "Waiting for {count} teammate to be ready…",
    "team_next_round": "The next round starts in {seconds} s",
    "dropped_title": "Your seat was given to an agent",
    "dropped_text": "You were away for too long, so an agent took over your seat to let your "
                    "teammates finish. Thank you for taking part.",
    # questionnaires
    "missing_note": "Please answer this question.",
    "missing": "{count} questions still need an answer.",
    "missing_one": "One question still needs an answer.",
    "rank_hint": "Tap the robots in order, from first to last. Tap a robot again to take it "
                 "back.",
    # a study of several robots: which session a page belongs to
    "session_of": "Session {number} of {of}",
    # rounds
    "practice_round": "Practice round {number} of {of}",
    "round": "Round {number} of {of}",
    "start_practice_round": "Start practice round {number} of {of}",
    "start_round": "Start round {number} of {of}",
    "summary": "Round {number}: you finished {cookies} cookies ({cookie})",
    "summary_one": "Round {number}: you finished {cookies} cookie ({cookie})",
    "summary_teammate": ", your teammate {teammate}.",
    "summary_end": ".",
    "robot_ready": "Robot {robot} is ready to bring the next kits.",
    "kits_waiting": "Kits waiting",
    "kits_left": "{cookie} × {count}",
    "your_station": "Your station",
    "teammate_station": "Agent teammate's station",
    "next_room": "(next room)",
    "kit": "{cookie} cookies",
    "carried_yours": "you",
    "carried_teammates": "teammate",
    "finished": "Finished: {count}",
    "seconds_left": "{seconds} s",
    "time_up": "Time!",
    "letters_hint": "Drag the letters onto the cookie to spell {text}. Click a letter on the "
                    "cookie to take it off.",
    "squares_hint": "Click the boxes to draw {text}. Click again to clear a box.",
    # refusals the page explains
    "too_fast": "Easy there — that cookie was too quick to count.",
    "wrong_cookie": "That cookie does not match the pattern.",
    "round_closed": "Time was up before that cookie arrived.",
    "invalid_answer": "Please answer every question.",
    "refused": "The bakery could not take that ({reason}).",
    # the page instead of a step
    "other_browser_title": "This study is open in another browser",
    "other_browser_text": "Please continue in the browser where you started. If that is not "
                          "possible, ask the experimenter to release your link; then reload "
                          "this page.",
    "no_cookie_title": "Cookies are needed",
    "no_cookie_text": "This study keeps your place with a cookie. Please allow cookies for "
                      "this site and reload the page.",
    "bad_link_title": "This link is not valid",
    "bad_link_text": "Please check the link you were given.",
    "other_tab_title": "This study is open in another tab",
    "other_tab_text": "You opened this study in another tab or window of this browser, so "
                      "this one is paused.",
    "continue_here": "Continue here",
    "storage_wait_title": "One moment, please",
    "storage_wait": "One moment, please: the bakery is catching up. Please keep this page "
                    "open; it goes on by itself.",
    # the server's error pages (an address it does not know, a failure of its own)
    "not_found_title": "This page does not exist",
    "not_found_text": "The address may be mistyped or out of date. Please check it, or open "
                      "the link you were given.",
    "back_to_study": "Back to the study",
    "error_title": "Something went wrong",
    "error_text": "The bakery could not show this page. What you did before is saved. "
                  "Please reload the page in a moment; if this happens again, please "
                  "contact the researchers.",
    # the experimenter's holds
    "paused_title": "Please wait a moment",
    "paused_text": "The study is paused for a moment. Please keep this page open: it "
                   "continues by itself as soon as the study goes on.",
    "aborted_title": "This session has ended",
    "aborted_text": "The experimenter has ended this session. Thank you for your time. You "
                    "may close this window now, or, if you would rather have everything "
                    "recorded about you deleted, withdraw below.",
    # withdrawing
    "leave": "Stop and withdraw from the study",
    "leave_title": "Stop and delete your data?",
    "leave_text": "If you stop now, the study ends here and everything recorded about you — "
                  "your answers, rounds and cookies — is deleted right away. This cannot be "
                  "undone.\n\nYou are free to stop at any time, without giving a reason.",
    "keep_going": "Keep going",
    "leave_confirm": "Stop and delete my data",
    "back_stays": "You are still in the study. To stop, use “{leave}” at the bottom of the "
                  "page.",
    "withdraw_later_title": "Changed your mind later?",
    "withdraw_later_text": "This private link deletes all your data, at any time. Keep it "
                           "somewhere safe; nobody else has it.",
    # the private withdrawal link's pages
    "withdraw_page": "Withdraw",
    "withdraw_title": "Withdraw from the study",
    "withdraw_text": "If you withdraw, everything recorded about your visit to the bakery is "
                     "deleted right away: your answers, your rounds and your cookies. Only "
                     "the fact that someone withdrew is kept. This cannot be undone.",
    "withdraw_confirm": "Delete my data",
    "withdrawn_title": "Your data has been deleted",
    "withdrawn_text": "You withdrew from the study and all your data was deleted. Thank you "
                      "for your time.",
    "withdraw_used_title": "This link is not valid",
    "withdraw_used_text": "It may have been used already: a withdrawal link works once, and "
                          "the data it concerned is then deleted. If you think something "
                          "went wrong, please contact the researchers.",
    # links that lead to no participant, and the site's front page
    "closed_title": "Please use the link you were given",
    "closed_text": "This study can only be started from the link of a recruitment platform "
                   "or the link the experimenter gave you.",
    "unknown_title": "This link is not valid",
    "unknown_text": "No participant has this code. Please check the link you were given, or "
                    "ask the experimenter for a new one.",
    "bad_id_title": "This link does not carry a valid participant id",
    "bad_id_text": "The participant id in this link is not one the recruitment platform "
                   "gives out, so the study cannot start from it. Please open the study "
                   "again from the platform's page; if this page comes back, please "
                   "contact the researchers.",
    "welcome_title": "Welcome to the bakery",
    "welcome_text": "Please open the personal link you were given to take part in the study.",
    "welcome_start": "Start a new visit",
}

# The defaults that differ where the pages present the agent teammate as a person until
# the debrief (``agent_teammate = "concealed"``, the paper's confederate method).
CONCEALED_AGENT_TEXTS: dict[str, str] = {
    "teammate_hello": "Your teammate's station is in the room next door — the programs "
                      "are synced.",
    "teammate_station": "Teammate's station",
}


def default_texts(agent_teammate: str) -> dict[str, str]:
    """The page's words before a protocol's ``[texts]``: none that calls an agent a person
    unless the protocol declares it does (``agent_teammate``)."""
    if agent_teammate == "concealed":
        return {**DEFAULT_TEXTS, **CONCEALED_AGENT_TEXTS}
    return dict(DEFAULT_TEXTS)


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def plural_of(key: str) -> str | None:
    """The text whose singular ``key`` is (None when ``key`` is no singular)."""
    plural = key.removesuffix(SINGULAR)
    return plural if plural != key and plural in DEFAULT_TEXTS else None


def singular_of(key: str) -> str | None:
    """The singular of the text ``key`` (None when it has none)."""
    return key + SINGULAR if key + SINGULAR in DEFAULT_TEXTS else None


def allowed_placeholders(key: str) -> set[str]:
    """What an override of ``key`` may use: its default's placeholders; a singular, its
    plural's (it may show the number its default leaves out)."""
    return placeholders(DEFAULT_TEXTS[plural_of(key) or key])
