def O(id, q):
    return dict(id=id, q=q, topic='none', type='direct', answerability='out_of_domain', phase='none', wp='none', jur='none', ptype='none')
QS = [
O('CO01', "How do I calculate a progress claim under the NSW building and construction security of payment act?"),
O('CO02', "What does it cost per square metre to build a four-bedroom house in Perth?"),
O('CO03', "How many weeks of annual leave does a carpentry apprentice get each year?"),
O('CO04', "What concrete mix ratio gives a 25 MPa finish for a residential driveway?"),
O('CO05', "How do I export a Revit model to IFC for the structural engineer?"),
O('CO06', "Which paint finish hides scuffs best on a hallway wall?"),
O('CO07', "How do I get council approval for a backyard deck in Brisbane?"),
O('CO08', "What's the best way to market a small plastering business on social media?"),
O('CO09', "How do I apply for a home loan pre-approval?"),
O('CO10', "What is the capital city of Australia?"),
O('CO11', "Give me a recipe for a sourdough loaf."),
O('CO12', "Who won the 2019 Rugby World Cup?"),
O('CO13', "How do I reset my Outlook email password?"),
O('CO14', "Write a Python function that reverses a string."),
O('CO15', "When is the best time of year to plant tomatoes?"),
O('CO16', "Summarise the plot of Shakespeare's Macbeth."),
O('CO17', "Translate 'good morning' into Japanese."),
]
