"""A small hand-labelled set of (prediction, target) pairs for comparing answer checkers (bench_rewards).

The label says whether a careful human grader, following ChartQA's intent (a value read off a chart may be a
little off; names and categories must match; the form of writing does not matter), accepts the prediction. Targets
are in the forms ChartQA uses (most taken from tests/fixtures/chartqa_real); predictions are forms models write.
"""

LABELLED = [
    # (prediction, target, human label)
    ("42", "42", True),  # identical
    ("42.0", "42", True),  # decimal form
    ("43", "42", True),  # a reading error within ChartQA's tolerance
    ("50", "42", False),  # a wrong value
    ("45%", "45", True),  # a percentage question answered with the sign
    ("45 %", "45", True),  # ... with a space
    ("45 percent", "45", True),  # ... in words
    ("0.45", "45%", True),  # the same share as a fraction
    ("45", "0.45", False),  # a share of 0.45 answered as 45: not the same number
    ("1,234", "1234", True),  # thousands separator
    ("1234", "1,234", True),  # ... on the target side
    ("537,689", "537689", True),  # a real ChartQA value with a separator
    ("$45", "45", True),  # a currency sign
    ("45 million", "45", True),  # the axis unit repeated
    ("45 kg", "45", True),  # a unit
    ("twelve", "12", True),  # number words
    ("two", "2", True),  # a small count in words
    ("3", "2", False),  # a wrong count
    ("Italy", "italy", True),  # case
    ("Italy.", "Italy", True),  # a final full stop
    ("The United States", "United States", True),  # an article
    ("USA", "United States", True),  # a synonym
    ("grey", "gray", True),  # a spelling variant
    ("Perisope", "Periscope", False),  # a misspelled label: another label
    ("WhatsApp", "Whatsapp", True),  # case inside a name
    ("Yes", "yes", True),  # yes, case
    ("Yes, it is.", "Yes", True),  # yes, in a sentence
    ("No", "Yes", False),  # the opposite
    ("2012", "2012", True),  # a year
    ("2013", "2012", False),  # the next year
    ("2008", "2009", False),  # the previous year
    ("The answer is 2008", "2008", True),  # the answer in a sentence
    ("between 2008 and 2009", "2008", False),  # two answers
    ("[2011, 2012]", "[2011, 2012]", True),  # a list
    ("2011, 2012", "[2011, 2012]", True),  # a list without brackets
    ("2012, 2011", "[2011, 2012]", True),  # another order
    ("[2011]", "[2011, 2012]", False),  # a value missing
    ("[1.34, 1.37]", "[1.34, 1.37]", True),  # a real ChartQA list
    ("-1.6", "-1.6", True),  # negative
    ("\u22121.6", "-1.6", True),  # Unicode minus
    ("1.6", "-1.6", False),  # the sign lost
    ("0", "0", True),  # zero
    ("0.0", "0", True),  # zero, decimal form
    ("0.33", "0.33333333", True),  # rounded
    ("1/3", "0.33333333", True),  # a fraction
    ("33.3%", "0.33333333", True),  # a percentage of a share
    ("5.1", "5.11", True),  # a reading error
    ("969", "969.26", True),  # rounded to an integer
    ("970", "969.26", True),  # a reading error
    ("1.18", "1.33", False),  # a neighbouring bar
    ("5G", "5", False),  # a label, not a number
    ("\\frac{1}{2}", "0.5", True),  # LaTeX
    ("1e3", "1000", True),  # scientific notation
    ("28.6%", "28.6", True),  # a real ChartQA share with the sign
    ("0.57", "57%", True),  # fraction for a percentage
    ("Inspired", "inspired", True),  # a real ChartQA label, case
    ("Ted Baker", "Ted Baker", True),  # a brand
    ("Ted", "Ted Baker", False),  # a partial name
    ("Saudi Arabia", "Saudi arabia", True),  # case
    ("6.60", "6.6", True),  # a trailing zero
]
