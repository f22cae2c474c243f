"""In real headless Chromium: a fresh user creates a team, invites by link, and a second person
signs up through the link and sees the team."""

from __future__ import annotations

import re

import pytest

from tests.browser import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_create_a_team_invite_by_link_and_a_newcomer_signs_up(browser_page, live_server, user_factory):
    from dashboard.teams.models import Membership, Team

    page = browser_page
    user_factory("founder", password="pw-for-browser-123")
    browser_login(page, live_server, "founder", "pw-for-browser-123")
    page.wait_for_selector("text=Create your team")  # no team yet: the first login lands here
    page.fill("#create-team input[name=name]", "Launch Crew")
    page.click("#create-team button")
    # A web-made team's slug carries a random tail, so a name says nothing of other users' teams.
    page.wait_for_url(re.compile(r"/t/launch-crew-[0-9a-z]+/members/$"))
    assert page.locator("#team-switcher option:checked").inner_text() == "Launch Crew"

    page.select_option("#invite-form select[name=role]", "member")
    page.click("#invite-form button")
    link = page.locator("#invite-link").inner_text().strip()
    path = re.search(r"/invite/[^/]+/", link)
    assert path is not None, link

    # The second person is a visitor in a fresh browser context: no session, no account.
    newcomer = page.context.browser.new_context().new_page()
    newcomer.goto(live_server.url + path.group(0))
    newcomer.wait_for_selector("text=Join Launch Crew")
    newcomer.fill("input[name=username]", "newcomer")
    newcomer.fill("input[name=password1]", "violet-harbour-417")
    newcomer.fill("input[name=password2]", "violet-harbour-417")
    newcomer.click("#signup-form button")
    newcomer.wait_for_url(re.compile(r"/t/launch-crew-[0-9a-z]+/$"))
    assert "you joined Launch Crew" in newcomer.locator(".messages").inner_text()
    newcomer.click("nav.mainnav >> text=Team")
    newcomer.wait_for_selector("#members >> text=founder")
    assert "newcomer" in newcomer.locator("#members").inner_text()

    team = Team.objects.get(name="Launch Crew")
    assert team.memberships.get(user__username="newcomer").role == Membership.Role.MEMBER
    # The founder's members page now lists the invite as used, and the link is spent.
    page.goto(live_server.url + f"/t/{team.slug}/members/")
    assert "used by newcomer" in page.locator("#past-invites").inner_text()
    again = newcomer.context.browser.new_context().new_page()
    again.goto(live_server.url + path.group(0))
    assert "already been used" in again.locator("#invite-problem").inner_text()
    assert page.foreign_requests == [] and page.js_errors == []
